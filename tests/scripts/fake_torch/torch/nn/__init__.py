from . import functional
class Linear:
    def __init__(self,*a,**k): pass
    def __call__(self,x): from torch import T; return T()
