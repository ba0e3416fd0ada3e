"""Which EP ORT placed each node of a CUDA-asking session on, asked of ORT's own public API.

ORT hands a node with no CUDA kernel for its type, version or dtype to the CPU EP without a word, and
`get_providers()` names the CUDA EP exactly as for a session whose every node runs on CUDA. So the census
asks ORT's partitioner what it did: since ORT 1.24, a session built with the config entry
`session.record_ep_graph_assignment_info=1` answers `get_provider_graph_assignment_info()` with each EP's
subgraphs and their nodes (name, domain, op type). The entry costs one record per node while the graph is
partitioned, nothing per run (docs/design.md says why this and not the verbose log or the profiler).

The entry is added to the session's own SessionOptions (the test's object, or a fresh one where it passed
none): an ORT session copies its options when it is built, so there is no other place to say it. A test
that set the entry to "0" itself keeps its choice, and its placement is unseen, with that reason.
"""
from __future__ import annotations

from typing import Any

from .schema import first_line

RECORD_KEY = "session.record_ep_graph_assignment_info"
ONNX_DOMAINS = ("", "ai.onnx")  # the default domain: an op of it is named by its type alone
NO_API = "this ORT cannot report node placement (InferenceSession.get_provider_graph_assignment_info is from ORT 1.24)"
TURNED_OFF = f"the test set {RECORD_KEY} to 0 itself"

# a placement: (ep, op, node name) per node, in ORT's order; or why it could not be read
Placement = tuple[tuple[str, str, str], ...]


def op_name(domain: str, op_type: str) -> str:
    """An op as rules and reports name it: `Unique`, `com.microsoft.MoE`."""
    return op_type if domain in ONNX_DOMAINS else f"{domain}.{op_type}"


def ask(session: Any, options_class: Any) -> str | None:
    """Make the next build of `session` record its placement; None, or why it will not (the test said no)."""
    options = getattr(session, "_sess_options", None)
    if options is None:
        if options_class is None:
            return NO_API
        try:
            options = options_class()
            session._sess_options = options  # what _create_inference_session builds from when it is set
        except Exception as exc:  # an ORT whose options cannot be made or set: nothing to ask with
            return first_line(exc) or type(exc).__name__
    try:
        said = options.get_session_config_entry(RECORD_KEY)
    except Exception:  # not set: the usual case (ORT raises for an entry that is absent)
        said = None
    if said == "0":
        return TURNED_OFF
    if said == "1":  # asked already (the same options built an earlier session): ORT warns when it is set again
        return None
    try:
        options.add_session_config_entry(RECORD_KEY, "1")
    except Exception as exc:
        return first_line(exc) or type(exc).__name__
    return None


def read(session: Any) -> Placement | str:
    """The session's placement as ORT recorded it when it was built, or why it cannot be read."""
    sess = getattr(session, "_sess", None)
    method = getattr(sess, "get_provider_graph_assignment_info", None)
    if method is None:
        return NO_API
    try:
        out = []
        for subgraph in method():
            ep = str(subgraph.ep_name)
            for node in subgraph.get_nodes():
                out.append((ep, op_name(str(node.domain), str(node.op_type)), str(node.name)))
        return tuple(out)
    except Exception as exc:  # recording was off after all, or ORT failed to say: the reason, never a guess
        return first_line(exc) or type(exc).__name__
