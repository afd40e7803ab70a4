from torch import _t as silu, _t as linear, _t as layer_norm, _t as rms_norm
