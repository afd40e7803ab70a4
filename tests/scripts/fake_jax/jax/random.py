def PRNGKey(s): return 0
def split(k,n): return [0]*n
def normal(k,shape,dt): from jax import A; return A(shape)
