"""The GPU-programming lesson's radio-astronomy pipeline, as the lesson
writes it: kappa-sigma clipping around the median, a 5-sigma mask, labels,
centres of mass and fluxes; with numpy/scipy on the CPU and CuPy/cupyx on
the GPU. Imported by lesson_peers.py and batch_cupy.py."""
import numpy as np


def lesson_numpy(data):
    from scipy.ndimage import label, center_of_mass, sum_labels
    f = data.ravel()
    while True:
        med = np.median(f)
        std = np.std(f)
        lower = f.compress(f > med - 3 * std)
        both = lower.compress(lower < med + 3 * std)
        if len(both) == len(f):
            break
        f = both
    std = f.std()
    seg = np.where(data > 5 * std, 1, 0)
    lab = np.empty(data.shape)
    n = label(seg, output=lab)
    pos = center_of_mass(data, lab, range(1, n + 1))
    flux = sum_labels(data, lab, range(1, n + 1))
    return float(std), n, pos, flux


def run_cupy(data):
    import cupy as cp
    from cupyx.scipy.ndimage import label, center_of_mass, sum_labels

    def clip(f):
        while True:
            med = cp.median(f)
            std = cp.std(f)
            lower = f[f > med - 3 * std]
            both = lower[lower < med + 3 * std]
            if len(both) == len(f):
                break
            f = both
        return f

    d = cp.asarray(data)
    f = clip(d.ravel())
    std = f.std()
    seg = cp.where(d > 5 * std, 1, 0)
    lab = cp.empty(d.shape)
    n = label(seg, output=lab)
    pos = center_of_mass(d, lab, cp.arange(1, n + 1))
    flux = sum_labels(d, lab, cp.arange(1, n + 1))
    return float(std), int(n), cp.asnumpy(cp.asarray(pos)), cp.asnumpy(flux)
