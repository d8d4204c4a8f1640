import pytest

from yolodoctor.devices import parse_device


@pytest.mark.parametrize("value,cuda,kind,indices", [
    (None, True, "cuda", (0,)), (None, False, "cpu", ()), ("", True, "cuda", (0,)),
    ("cpu", True, "cpu", ()), ("0", True, "cuda", (0,)), (1, True, "cuda", (1,)), ("0,1", True, "cuda", (0, 1)),
    ([0, 2], True, "cuda", (0, 2)), ("cuda:1", True, "cuda", (1,)), ("mps", False, "mps", ()),
    (-1, False, "cpu", ()), ("-1,-1", True, "cuda", (0, 1)), ("npu:0", True, "other", ()),
])
def test_parse_device(value, cuda, kind, indices):
    d = parse_device(value, cuda)
    assert (d.kind, d.indices) == (kind, indices)
