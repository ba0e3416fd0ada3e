"""Force CUDA EP provider options (teeth: sdpa_kernel=16) into every InferenceSession.

ORT takes providers as names, as (name, options) tuples, or as names plus a
parallel provider_options list, by keyword or by position, in the constructor
and in set_providers. A canary that misses one form has no teeth for the tests
that use it, so every form is handled and every rewrite is recorded.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

CUDA_EP = "CUDAExecutionProvider"

# What was passed to ORT, newest last. Process-wide, as the class patch itself is:
# fixture suites read it to prove each form was rewritten.
INJECTIONS: list[dict[str, Any]] = []


def asks_for_cuda(providers: Any) -> bool:
    """Whether a providers argument names the CUDA EP, in any of its forms."""
    return any((p if isinstance(p, str) else p[0]) == CUDA_EP for p in providers or ()
               if isinstance(p, str) or (isinstance(p, (tuple, list)) and p))


def inject_options(providers: Any, provider_options: Any, forced: dict[str, str]) -> tuple[Any, Any]:
    """Merge `forced` into the CUDA EP's options for all three ways of naming providers.

    Providers that do not name the CUDA EP come back as the very same objects: nothing was injected.
    """
    if not asks_for_cuda(providers):
        return providers, provider_options
    if provider_options is not None:
        names = [p if isinstance(p, str) else p[0] for p in providers]
        opts = [dict(o or {}) for o in provider_options]
        for i, name in enumerate(names):
            if name == CUDA_EP and i < len(opts):
                opts[i].update(forced)
        return list(providers), opts
    out = []
    for p in providers:
        if isinstance(p, str) and p == CUDA_EP:
            out.append((p, dict(forced)))
        elif isinstance(p, (tuple, list)) and len(p) == 2 and p[0] == CUDA_EP:
            out.append((p[0], {**dict(p[1] or {}), **forced}))
        else:
            out.append(p)
    return out, None



ASKED_CUDA = "_ort_matrix_asked_cuda"  # set on each session: did its providers name the CUDA EP?


def wrap_providers(original: Callable[..., Any], via: str, forced: dict[str, str],
                   on_injection: Callable[[], str]) -> Callable[..., Any]:
    """Wrap a method that takes providers (__init__, set_providers): note whether the session asked
    for the CUDA EP (the census counts only such sessions' runs), and make `forced` reach it."""
    signature = inspect.signature(original)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        providers = bound.arguments.get("providers")
        options = bound.arguments.get("provider_options")
        try:
            setattr(self, ASKED_CUDA, asks_for_cuda(providers))
        except AttributeError:
            pass
        if not forced:
            return original(*bound.args, **bound.kwargs)
        new_providers, new_options = inject_options(providers, options, forced)
        if new_providers is not providers:
            bound.arguments["providers"] = new_providers
            bound.arguments["provider_options"] = new_options
            test = on_injection()  # counts it for the current test, and names that test
            INJECTIONS.append({"test": test, "via": via, "given": {"providers": providers, "provider_options": options},
                               "passed": {"providers": new_providers, "provider_options": new_options}})
        return original(*bound.args, **bound.kwargs)

    return wrapper
