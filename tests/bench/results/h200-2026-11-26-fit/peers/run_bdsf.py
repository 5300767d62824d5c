import sys, time, os, resource
import bdsf
n = sys.argv[1]; nc = int(sys.argv[2]) if len(sys.argv) > 2 else 2
os.chdir('/tmp/peers')
t0 = time.time(); c0 = resource.getrusage(resource.RUSAGE_SELF); 
img = bdsf.process_image(f'sim{n}.fits', thresh_isl=3.0, thresh_pix=5.0, quiet=True, ncores=nc)
t1 = time.time()
img.write_catalog(outfile=f'bdsf{n}_gaul.fits', format='fits', catalog_type='gaul', clobber=True)
img.write_catalog(outfile=f'bdsf{n}_srl.fits', format='fits', catalog_type='srl', clobber=True)
t2 = time.time()
ru = resource.getrusage(resource.RUSAGE_SELF); rc = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"bdsf {n} ncores={nc} process_image_wall={t1-t0:.2f} write_wall={t2-t1:.2f} "
      f"ngaus={img.ngaus} nsrc={img.nsrc} nisl={img.nisl} "
      f"cpu_self={ru.ru_utime+ru.ru_stime:.2f} cpu_children={rc.ru_utime+rc.ru_stime:.2f} "
      f"load={open('/proc/loadavg').read().split()[0]}", flush=True)
