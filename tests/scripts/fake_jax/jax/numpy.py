from jax import A
bfloat16='bf16'; int32='i32'
def array(x,dt): return A()
def ones(s,dt): return A(s)
def zeros(s,dt): return A(s)
def zeros_like(a): return A(a.shape)
def full(s,v,dt): return A(s)
