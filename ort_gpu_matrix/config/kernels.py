"""The attention kernel tiers ORT reports, named once for the whole engine.

ORT prints the tier that ran as `SdpaKernel=<TIER>` when
ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO=1, and takes a bitmask of allowed tiers
as the CUDA EP option `sdpa_kernel`. Only the bits below were measured on the
H200 (docs/evidence/h200.md); other tiers still appear in the census by name.
"""
from __future__ import annotations

FLASH = "FLASH_ATTENTION"
EFFICIENT = "EFFICIENT_ATTENTION"
TRT_FUSED = "TRT_FUSED_ATTENTION"
CUDNN = "CUDNN_FLASH_ATTENTION"
MATH = "MATH"

KNOWN = (FLASH, EFFICIENT, TRT_FUSED, CUDNN, MATH)  # named here; the census and the rules take any other name too

# how reports name a tier where room is short; any other name is shown as it is
SHORT = {CUDNN: "cuDNN", FLASH: "flash", EFFICIENT: "efficient", TRT_FUSED: "trt fused", MATH: "MATH"}


def short_tier(tier: str) -> str:
    return SHORT.get(tier, tier)


# sdpa_kernel bits: FLASH 1, EFFICIENT 2, TRT_FUSED 4, CUDNN_FLASH 8, MATH 16
SDPA_BITS = {FLASH: 1, EFFICIENT: 2, TRT_FUSED: 4, CUDNN: 8, MATH: 16}



def teeth_message(tier: str) -> str:
    """What unittest's assertEqual(tier, observed) says when MATH ran instead: the canary's bite."""
    return f"AssertionError: '{tier}' != '{MATH}'"


TEETH_MESSAGE = teeth_message(CUDNN)  # ORT's own canary: its tests require cuDNN flash attention


def only(tier: str) -> str:
    """The sdpa_kernel option value that allows `tier` alone."""
    return str(SDPA_BITS[tier])
