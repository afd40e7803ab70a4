class Mesh:
    def __init__(self,d,n): pass
def PartitionSpec(*a): return None
