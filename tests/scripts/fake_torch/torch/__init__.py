# A stand-in for the real package with just what scripts/gpu-probes/ calls, so that
# tests/scripts/gpu_probes_test.sh can run the probes end to end on a machine without a GPU.
import contextlib, time
class T:
    grad=None
    def __init__(self,*a,**k): pass
    def _k(self,*a,**k): time.sleep(0); return T()
    __mul__=__add__=index_select=index_add_=float=view=detach=clone=requires_grad_=sum=_k
    def backward(self): pass
    def item(self): return 0.0
def _t(*a,**k): return T()
randn=ones=zeros=empty=randint=add=sigmoid=softmax=cat=_t
def topk(*a,**k): return (T(),T())
def manual_seed(s): pass
bfloat16='bf16'; float32='f32'
def device(s): return s
__version__='fake'
class version: cuda='13.0'
from . import nn
from . import cuda
