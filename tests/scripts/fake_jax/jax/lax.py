from jax import A
def ragged_dot(a,b,g): return A()
def ragged_all_to_all(*a, axis_name=None): return A()
