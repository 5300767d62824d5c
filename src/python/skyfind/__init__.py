"""skyfind from Python: find sources in an image in memory or in a FITS file.

    import skyfind
    from astropy.io import fits
    with fits.open("image.fits") as h:
        cat = skyfind.find(h[0].data, h[0].header, pipeline="radio")
    print(cat["x", "y", "peak", "snr"])

``find`` and ``find_file`` return an ``astropy.table.Table`` with the columns
of ``skyfind run``'s CSV catalogue (same names, units and values; ``x`` and
``y`` are 1-based FITS pixel coordinates). The work is done by the C library
(libskyfind.so, through ctypes): the same stages, CPU twins and GPU stages as
the command-line tool. Errors raise ``skyfind.SkyfindError`` with the
library's message.
"""
import ctypes
import ctypes.util
import os

import numpy as np

__all__ = ["find", "find_file", "stages", "SkyfindError", "library_path"]


class SkyfindError(RuntimeError):
    """A skyfind failure; the message is the library's (sf_errdetail)."""


def _load():
    names = []
    if os.environ.get("SKYFIND_LIBRARY"):
        names.append(os.environ["SKYFIND_LIBRARY"])
    here = os.path.dirname(os.path.abspath(__file__))
    names += [os.path.join(here, "libskyfind.so.0"), os.path.join(here, "libskyfind.so")]
    found = ctypes.util.find_library("skyfind")
    if found:
        names.append(found)
    errors = []
    for n in names:
        if n and (os.path.isabs(n) is False or os.path.exists(n)):
            try:
                return ctypes.CDLL(n), n
            except OSError as e:
                errors.append(f"{n}: {e}")
    raise ImportError("skyfind: cannot load libskyfind.so (set SKYFIND_LIBRARY to its path; tried "
                      + "; ".join(errors or names) + ")")


_lib, library_path = _load()


class _Array(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("nx", ctypes.c_int),
                ("ny", ctypes.c_int), ("row_bytes", ctypes.c_longlong), ("header", ctypes.c_char_p),
                ("on_gpu", ctypes.c_int)]


class _Opts(ctypes.Structure):
    _fields_ = [("pipeline", ctypes.c_char_p), ("backend", ctypes.c_char_p),
                ("set", ctypes.POINTER(ctypes.c_char_p)), ("nset", ctypes.c_int), ("keep", ctypes.c_uint)]


_P = ctypes.c_void_p
_lib.sf_find.argtypes = [ctypes.POINTER(_Array), ctypes.POINTER(_Opts), ctypes.POINTER(_P)]
_lib.sf_find.restype = ctypes.c_int
_lib.sf_find_file.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_Opts), ctypes.POINTER(_P)]
_lib.sf_find_file.restype = ctypes.c_int
_lib.sf_errdetail.restype = ctypes.c_char_p
for _f, _r in (("sf_found_nrows", ctypes.c_int), ("sf_found_ncols", ctypes.c_int),
               ("sf_found_colname", ctypes.c_char_p), ("sf_found_colunit", ctypes.c_char_p),
               ("sf_found_colfmt", ctypes.c_char_p), ("sf_found_colint", ctypes.c_int),
               ("sf_found_column", ctypes.POINTER(ctypes.c_double)),
               ("sf_found_backend", ctypes.c_char_p)):
    getattr(_lib, _f).restype = _r
    getattr(_lib, _f).argtypes = [_P] if _f in ("sf_found_nrows", "sf_found_ncols", "sf_found_backend") \
        else [_P, ctypes.c_int]
_lib.sf_found_stat.argtypes = [_P, ctypes.c_char_p]
_lib.sf_found_stat.restype = ctypes.c_double
_lib.sf_found_map.argtypes = [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
                              ctypes.POINTER(ctypes.c_longlong), ctypes.POINTER(ctypes.c_int),
                              ctypes.POINTER(ctypes.c_int)]
_lib.sf_found_map.restype = ctypes.c_void_p
_lib.sf_found_nstages.argtypes = [_P]
_lib.sf_found_nstages.restype = ctypes.c_int
_lib.sf_found_stage.argtypes = [_P, ctypes.c_int, ctypes.POINTER(ctypes.c_double)]
_lib.sf_found_stage.restype = ctypes.c_char_p
_lib.sf_found_free.argtypes = [_P]
_lib.sf_found_free.restype = None

# the stage registry (include/skyfind/pipeline.h: sf_param_spec, sf_stage_def)
class _Param(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("type", ctypes.c_int), ("default", ctypes.c_char_p),
                ("min", ctypes.c_double), ("max", ctypes.c_double), ("choices", ctypes.c_char_p),
                ("unit", ctypes.c_char_p), ("help", ctypes.c_char_p), ("offset", ctypes.c_size_t)]


class _Stage(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("desc", ctypes.c_char_p), ("params", ctypes.POINTER(_Param)),
                ("nparams", ctypes.c_int), ("params_size", ctypes.c_size_t), ("needs", ctypes.c_uint),
                ("gives", ctypes.c_uint), ("cpu", ctypes.c_void_p), ("gpu", ctypes.c_void_p),
                ("check", ctypes.c_void_p)]


_lib.sf_stage_count.restype = ctypes.c_int
_lib.sf_stage_count.argtypes = []
_lib.sf_stage_at.restype = ctypes.POINTER(_Stage)
_lib.sf_stage_at.argtypes = [ctypes.c_int]

# numpy kinds to sf_dtype (include/skyfind/skyfind.h)
_DT = {np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.uint16): 3, np.dtype(np.int16): 4,
       np.dtype(np.uint32): 5, np.dtype(np.int32): 6, np.dtype(np.uint64): 7, np.dtype(np.int64): 8,
       np.dtype(np.float32): 9, np.dtype(np.float64): 10}


_PIPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipelines")


def _pipeline(p):
    """A pipeline name the library would look up in $SKYFIND_PIPELINES and its
    build's folders: the copy installed with the package when those are unset."""
    if p and "\n" not in p and "/" not in p and not p.endswith(".pipe") and \
            not os.environ.get("SKYFIND_PIPELINES") and os.path.isfile(os.path.join(_PIPES, p + ".pipe")):
        return os.path.join(_PIPES, p + ".pipe")
    return p


# maps a run can keep (sf_found_map), and the SF_KEEP_* bit of each (skyfind/pipeline.h)
MAPS = {"background": 4, "rms": 4, "segmentation": 2, "filtered": 8, "mask": 1}
_MAP_DT = {9: np.float32, 6: np.int32, 1: np.uint8}


def _keep(maps):
    if maps is None:
        return 0
    if isinstance(maps, str):
        maps = [maps]
    bits = 0
    for m in maps:
        if m not in MAPS:
            raise SkyfindError(f"maps: '{m}' is not one of {', '.join(MAPS)}")
        bits |= MAPS[m]
    return bits


def _opts(pipeline, backend, params, maps=None):
    pipeline = _pipeline(pipeline)
    sets = []
    for stage, values in params.items():
        if not isinstance(values, dict):
            raise SkyfindError(f"{stage}={values!r}: give a stage's parameters as a dict, "
                               f"e.g. threshold={{'nsigma': 4}}")
        for k, v in values.items():
            if isinstance(v, bool):
                v = "yes" if v else "no"
            sets.append(f"{stage}.{k}={v}".encode())
    arr = (ctypes.c_char_p * max(len(sets), 1))(*sets)
    o = _Opts(pipeline.encode() if pipeline else None, backend.encode() if backend else None,
              ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)), len(sets), _keep(maps))
    return o, arr


def _error():
    d = _lib.sf_errdetail()
    return SkyfindError(d.decode(errors="replace") if d else "skyfind: unknown error")


_STATS = ("h2d_bytes", "d2h_bytes", "total_ms", "upload_ms", "stages_ms")


def _maps(found, maps):
    """The kept maps as arrays, copied before the result is freed: NumPy for
    host memory, CuPy (a device-to-device copy) for device memory; None for a
    map the run did not make (filtered without a convolve stage)."""
    if isinstance(maps, str):
        maps = [maps]
    out = {}
    for name in maps:
        nx, ny, on_gpu, dt = ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        rb = ctypes.c_longlong()
        ptr = _lib.sf_found_map(found, name.encode(), ctypes.byref(nx), ctypes.byref(ny), ctypes.byref(rb),
                                ctypes.byref(dt), ctypes.byref(on_gpu))
        if not ptr:
            out[name] = None
            continue
        dtype = np.dtype(_MAP_DT[dt.value])
        shape, strides = (ny.value, nx.value), (rb.value, dtype.itemsize)
        if on_gpu.value:
            import cupy as cp
            mem = cp.cuda.UnownedMemory(ptr, rb.value * ny.value, None)
            view = cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(mem, 0), strides=strides)
            out[name] = view.copy()
        else:
            buf = (ctypes.c_char * (rb.value * ny.value)).from_address(ptr)
            out[name] = np.ndarray(shape, dtype, buffer=buf, strides=strides).copy()
    return out


def _table(found, table=True, maps=None):
    kept = None
    try:
        if maps is not None:
            kept = _maps(found, maps)
        n = _lib.sf_found_nrows(found)
        cols, units, fmts = {}, {}, {}
        for j in range(_lib.sf_found_ncols(found)):
            name = _lib.sf_found_colname(found, j).decode()
            vals = np.ctypeslib.as_array(_lib.sf_found_column(found, j), shape=(n,)).copy() if n else \
                np.zeros(0)
            cols[name] = vals.astype(np.int64) if _lib.sf_found_colint(found, j) else vals
            units[name] = _lib.sf_found_colunit(found, j).decode()
            fmts[name] = _lib.sf_found_colfmt(found, j).decode()
        meta = {"backend": _lib.sf_found_backend(found).decode()}
        meta.update({k: _lib.sf_found_stat(found, k.encode()) for k in _STATS})
        stage_ms = {}
        for i in range(_lib.sf_found_nstages(found)):
            ms = ctypes.c_double()
            name = _lib.sf_found_stage(found, i, ctypes.byref(ms)).decode()
            stage_ms[name] = ms.value
        meta["stage_ms"] = stage_ms
    finally:
        _lib.sf_found_free(found)
    if not table:
        cols["meta"] = dict(meta, units=units, formats=fmts)
        return cols if maps is None else (cols, kept)
    from astropy.table import Table
    import astropy.units as u
    t = Table()
    for name, vals in cols.items():
        t[name] = vals
        if units[name]:
            t[name].unit = u.Unit(units[name], parse_strict="silent")
        t[name].meta["format"] = fmts[name]
    t.meta.update(meta)
    return t if maps is None else (t, kept)


def _header_text(header):
    if header is None:
        return None
    if isinstance(header, (bytes, str)):
        return header.encode() if isinstance(header, str) else header
    return header.tostring(sep="", endcard=False, padding=False).encode("ascii", errors="replace")


def _from_dlpack(data):
    """An object with only the DLPack protocol as a NumPy (CPU) or CuPy (CUDA)
    array, without a copy; other objects as they are."""
    if getattr(data, "__cuda_array_interface__", None) is not None or not hasattr(data, "__dlpack__") \
            or isinstance(data, np.ndarray):
        return data
    kind = data.__dlpack_device__()[0] if hasattr(data, "__dlpack_device__") else 1
    if kind == 1:  # kDLCPU
        return np.from_dlpack(data)
    if kind in (2, 13):  # kDLCUDA, kDLCUDAManaged
        try:
            import cupy as cp
        except ImportError as e:
            raise SkyfindError("find: a CUDA array given through DLPack needs CuPy to be read in place "
                               f"({e})") from None
        return cp.from_dlpack(data)
    raise SkyfindError(f"find: DLPack device type {kind} is neither the CPU nor CUDA")


def find(data, header=None, pipeline="radio", backend="auto", table=True, maps=None, **params):
    """Find the sources of a 2-D image in memory.

    data: a 2-D NumPy array (leading axes of length 1, as the FREQ and STOKES
    axes of radio images, are dropped; a cube's plane is chosen by indexing
    it) of any integer or float type (or bool), converted
    to float32 as skyfind's FITS reader converts; a masked array's masked
    pixels are blank (NaN), as NaN and +-Inf pixels are.
    header: an astropy Header (or FITS card text) for BUNIT, the restoring
    beam and the WCS; None: pixel columns only.
    pipeline: a name ("radio", "lesson", "sextractor", ...), a .pipe path or
    .pipe text. backend: "cpu", "gpu" or "auto".
    params: per stage, a dict of parameters, as --set stage.param=value:
    ``find(a, threshold={"nsigma": 4}, segment={"min_area": 5})``.
    A CuPy array (anything with __cuda_array_interface__, or a CUDA array
    with only DLPack's __dlpack__, read through cupy.from_dlpack), float32,
    is used in place on its GPU: the pixels do not cross to the host
    (meta["h2d_bytes"] counts what did). A CPU array with only __dlpack__
    is read through numpy.from_dlpack.
    maps: names among "background", "rms", "segmentation" (int32 labels,
    the catalogue's id), "filtered" and "mask" (uint8): the run keeps them
    and find returns (table, {name: array}); the arrays are of the input's
    kind: CuPy arrays on the image's GPU for a GPU image (device-to-device
    copies), NumPy arrays otherwise; None for a map the pipeline does not
    make.
    Returns an astropy Table; meta holds "backend" ("cpu" or "gpu"),
    "h2d_bytes", "d2h_bytes", "total_ms", "upload_ms", "stages_ms" (the
    stages' summed time, CUDA events on the GPU) and "stage_ms" (each
    stage's time, {name: ms}, in the pipeline's order). table=False returns a dict
    of NumPy columns instead, without astropy, with "meta" (as above, plus
    "units" and "formats", the CSV's printf format of each column)."""
    o, keep = _opts(pipeline, backend, params, maps)
    data = _from_dlpack(data)
    cai = getattr(data, "__cuda_array_interface__", None)
    if cai is not None:  # CuPy (or any CUDA array): used in place on its device
        img = _device_array(cai, header)
        found = _P()
        if _lib.sf_find(ctypes.byref(img), ctypes.byref(o), ctypes.byref(found)) != 0:
            raise _error()
        return _table(found, table, maps)
    a = np.ma.getdata(data)
    mask = np.ma.getmaskarray(data) if np.ma.is_masked(data) else None
    while a.ndim > 2 and a.shape[0] == 1:  # degenerate axes (FREQ, STOKES) of radio images
        a = a[0]
        mask = mask[0] if mask is not None else None
    if a.ndim != 2:
        raise SkyfindError(f"find: the image must be 2-D, not {a.ndim}-D (shape {a.shape})")
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    elif a.dtype == np.float16:
        a = a.astype(np.float32)
    a = np.asarray(a, dtype=a.dtype.newbyteorder("="))  # native byte order
    if a.dtype not in _DT:
        raise SkyfindError(f"find: pixels of type {a.dtype} are not supported")
    if mask is not None and mask.any():
        a = a.astype(np.float64) if a.dtype.kind != "f" else a.copy()
        a[mask] = np.nan
    if a.strides[1] != a.itemsize or a.strides[0] < a.shape[1] * a.itemsize:
        a = np.ascontiguousarray(a)
    img = _Array(a.ctypes.data, _DT[a.dtype], a.shape[1], a.shape[0], a.strides[0], _header_text(header), 0)
    found = _P()
    if _lib.sf_find(ctypes.byref(img), ctypes.byref(o), ctypes.byref(found)) != 0:
        raise _error()
    return _table(found, table, maps)


def _device_array(cai, header):
    """An sf_array of a __cuda_array_interface__ (float32, 2-D after dropping
    leading axes of length 1, rows a whole number of floats apart)."""
    shape = list(cai["shape"])
    typestr = cai["typestr"]
    item = int(typestr[2:])
    strides = list(cai.get("strides") or [])
    if not strides:  # C-contiguous
        strides, acc = [], item
        for d in reversed(shape):
            strides.insert(0, acc)
            acc *= d
    while len(shape) > 2 and shape[0] == 1:
        shape.pop(0)
        strides.pop(0)
    if len(shape) != 2:
        raise SkyfindError(f"find: the image must be 2-D, not {len(shape)}-D (shape {tuple(shape)})")
    if typestr[1:] != "f4" or typestr[0] == ">":
        raise SkyfindError(f"find: a GPU array must be float32, not {typestr} (a.astype(cupy.float32))")
    if strides[1] != 4 or strides[0] < 4 * shape[1] or strides[0] % 4:
        raise SkyfindError("find: a GPU array's rows must be contiguous (cupy.ascontiguousarray(a))")
    if cai.get("mask") is not None:
        raise SkyfindError("find: masked GPU arrays are not supported: blank the pixels with NaN")
    return _Array(cai["data"][0], _DT[np.dtype(np.float32)], shape[1], shape[0], strides[0],
                  _header_text(header), 1)


def find_file(path, pipeline="radio", backend="auto", plane=0, table=True, maps=None, **params):
    """Find the sources of one plane of a FITS file, read as ``skyfind run``
    reads it (plane: 1-based plane of a cube, 0 for the first). Arguments
    and result as ``find`` (maps: NumPy arrays)."""
    o, keep = _opts(pipeline, backend, params, maps)
    found = _P()
    if _lib.sf_find_file(os.fsencode(path), int(plane), ctypes.byref(o), ctypes.byref(found)) != 0:
        raise _error()
    return _table(found, table, maps)


def stages():
    """Every stage of the registry with its parameters, as ``skyfind stages``
    lists them: a list of dicts {name, description, params}, each parameter a
    dict {name, type (int, real, choice, bool or text), default (as written in
    a .pipe file), min, max (int and real), choices (choice), unit, help}."""
    kinds = ("int", "real", "choice", "bool", "text")
    out = []
    for i in range(_lib.sf_stage_count()):
        st = _lib.sf_stage_at(i).contents
        ps = []
        for k in range(st.nparams):
            p = st.params[k]
            d = {"name": p.name.decode(), "type": kinds[p.type], "default": (p.default or b"").decode(),
                 "unit": (p.unit or b"").decode(), "help": (p.help or b"").decode()}
            if p.type in (0, 1):
                d["min"], d["max"] = p.min, p.max
            if p.type == 2:
                d["choices"] = (p.choices or b"").decode().split("|")
            ps.append(d)
        out.append({"name": st.name.decode(), "description": st.desc.decode(), "params": ps})
    return out
