import contextlib, time
def is_available(): return True
def synchronize(): pass
class Event:
    def __init__(self,**k): self.t=0
    def record(self): self.t=time.perf_counter()
    def elapsed_time(self,o): return (o.t-self.t)*1e3*0.3
class Stream:
    def wait_stream(self,s): pass
def current_stream(): return Stream()
@contextlib.contextmanager
def stream(s): yield
class CUDAGraph:
    def replay(self): pass
@contextlib.contextmanager
def graph(g): yield
class _P: name='Fake GPU'; multi_processor_count=132
def get_device_properties(i): return _P()
def _sleep(cycles): pass
