"""custom_kernel captured in a CUDA graph and replayed, as a serving engine runs decode
(docs/commands.md: capturing the call in a CUDA graph): one call of the shape outside the
graph (it plans: reads kv_indptr on the host, runs the autopick), the next captured with
torch.cuda.graph, the captured input tensors then refilled in place with another input of
the same shape, the graph replayed; its output (the tensor the captured call returned) is
checked against the reference under the leaderboard's rule and against exact attention
within the serving form's bound. For every route and form that serves on the GPU under test,
forced with MLA_ROUTE. The torch route reads the indptrs on the host every call and a plan's
first call reads them too: captured, they raise GraphCaptureError (the graph's own exception
follows it, torch's capture_end on a capture CUDA invalidated). On a GPU alone (ROCm's HIP
graphs through the same torch.cuda API); the CPU halves are tests/test_host_launches.py's."""
import pytest
import torch

import reference
import submission as sub
from conftest import DEVICE, HAS_GPU

pytestmark = [pytest.mark.usefixtures("fresh_plans"),
              pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA or AMD GPU: CUDA graphs (HIP graphs on ROCm) "
                                                     "capture GPU work; the errors a call raises under capture are "
                                                     "tested on the CPU by tests/test_host_launches.py")]

SHAPES = [(4, 1024), (64, 1024)]  # a short call of two launches or one, and a wider one


def serving_here() -> list[str]:
    """MLA_ROUTE values of every route and form that can serve on the device under test."""
    return [f"{route.name}:{form}" for route in sub.ROUTES.values() for form in route.forms
            if route.unavailable_reason(DEVICE, form) is None]


def refill(data, fresh) -> None:
    """Copies `fresh` into `data`'s tensors in place (the same addresses: what was captured)."""
    pairs = [(data[0], fresh[0]), (data[2], fresh[2]), (data[3], fresh[3])]
    for fmt, tensors in data[1].items():
        pairs += zip(tensors, fresh[1][fmt]) if isinstance(tensors, tuple) else [(tensors, fresh[1][fmt])]
    for into, source in pairs:
        into.view(torch.uint8).copy_(source.view(torch.uint8))  # fp4 and e8m0 included, byte for byte


def chain(error: BaseException) -> list[BaseException]:
    found = []
    while error is not None and error not in found:
        found.append(error)
        error = error.__cause__ or error.__context__
    return found


def assert_right(data, out, runner) -> None:
    good, message = reference.check_implementation(data, out)
    assert good, f"{runner.label}: {message}"
    shape = sub.CallShape.of(data)
    exact = sub.TorchRunner(shape, runner.kv_format).exact(*data[:4])
    errors = sub.output_errors(out, exact, data[2])
    bound, name = runner.bound
    assert errors["nonfinite"] == 0 and errors["sequence_rms"] <= bound.sequence_rms, (runner.label, name, errors)
    assert errors["element"] <= bound.element, (runner.label, name, errors)


@pytest.mark.parametrize("batch,kv_len", SHAPES)
@pytest.mark.parametrize("route", serving_here())
def test_a_warmed_up_call_is_captured_and_replays_right_on_refilled_inputs(route, batch, kv_len, monkeypatch):
    monkeypatch.setenv("MLA_ROUTE", route)
    data = reference.generate_input(batch, 1, kv_len, 4220, device=DEVICE)
    warm = sub.custom_kernel(data)
    plan = sub._plan_for(data)
    assert_right(data, warm, plan.run)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    if route.startswith("torch:"):
        with pytest.raises(Exception) as raised:
            with torch.cuda.graph(graph):
                sub.custom_kernel(data)
        refusals = [e for e in chain(raised.value) if isinstance(e, sub.GraphCaptureError)]
        assert refusals and "The torch route reads the indptrs on the host" in str(refusals[0]), chain(raised.value)
        return
    with torch.cuda.graph(graph):
        out = sub.custom_kernel(data)
    for seed in (5412, 1357):  # two refills: nothing of the warm-up's or the last replay's input stays
        fresh = reference.generate_input(batch, 1, kv_len, seed, device=DEVICE)
        refill(data, fresh)
        graph.replay()
        torch.cuda.synchronize()
        assert_right(fresh, out, plan.run)
    assert plan.run is plan.runners[0] and sub._plan_for(data) is plan


@pytest.mark.parametrize("route", [route for route in serving_here() if not route.startswith("torch:")][:1])
def test_a_first_call_under_capture_says_to_call_the_shape_once_before(route, monkeypatch):
    monkeypatch.setenv("MLA_ROUTE", route)
    data = reference.generate_input(4, 1, 1024, 4217, device=DEVICE)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(Exception) as raised:
        with torch.cuda.graph(graph):
            sub.custom_kernel(data)
    refusals = [e for e in chain(raised.value) if isinstance(e, sub.GraphCaptureError)]
    assert refusals and "Call custom_kernel once on an input of this shape before capturing" in str(refusals[0])
    assert not sub._PLANS
    # then as the message says: a call outside the graph, and the capture serves
    sub.custom_kernel(data)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = sub.custom_kernel(data)
    fresh = reference.generate_input(4, 1, 1024, 4220, device=DEVICE)
    refill(data, fresh)
    graph.replay()
    torch.cuda.synchronize()
    assert_right(fresh, out, sub._plan_for(data).run)
