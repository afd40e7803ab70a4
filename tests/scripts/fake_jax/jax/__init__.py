# A stand-in for the real package with just what scripts/gpu-probes/ calls, so that
# tests/scripts/gpu_probes_test.sh can run the probes end to end on a machine without a GPU.
__version__='fake'
class A:
    def __init__(self,shape=(1,)): self.shape=shape
    def __getitem__(self,i): return A()
    def __matmul__(self,o): return A()
class _C:
    def __init__(self,f): self.f=f
    def __call__(self,*a): return self.f(*a)
    def cost_analysis(self): return [{"flops": 1e12}]
    def as_text(self): return "ragged-dot custom-call dot("
class _L:
    def __init__(self,f): self.f=f
    def compile(self): return _C(self.f)
class jit:
    def __init__(self,f): self.f=f
    def lower(self,*a): return _L(self.f)
def block_until_ready(x): return x
class _D:
    device_kind='Fake'
    def __str__(self): return 'cuda:0'
def devices(): return [_D()]
def shard_map(f, mesh=None, in_specs=None, out_specs=None, check_vma=True): return f
from . import random, numpy, lax, sharding
