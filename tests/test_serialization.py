"""ampc.save / ampc.load: round trips of every dtype (bfloat16 bit for bit),
views saved compactly, containers, identity of shared tensors, atomic
writes (a crash mid-save leaves the old file), and clear errors for
truncated, damaged, foreign and unsafe files."""
import collections
import io
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ampc
import ampc.nn as nn
from ampc import serialization
from helpers import bits, from_values, to64


def roundtrip(obj, **kw):
    buf = io.BytesIO()
    ampc.save(obj, buf)
    return ampc.load(io.BytesIO(buf.getvalue()), **kw)


def same(a, b):
    assert type(a) is type(b)
    assert a.dtype is b.dtype
    assert a.shape == b.shape
    assert a.requires_grad == b.requires_grad
    if a.dtype in (ampc.float16, ampc.bfloat16):
        np.testing.assert_array_equal(bits(a), bits(b))
    else:
        np.testing.assert_array_equal(to64(a), to64(b))


class Opaque:
    """A user class: only a weights_only=False load may rebuild it."""

    def __init__(self, v):
        self.v = v


class CallsGetcwd:
    """Pickles as a call of os.getcwd: what an unsafe pickle looks like."""

    def __reduce__(self):
        return (os.getcwd, ())


# ----------------------------------------------------------------------------
# round trips


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "int64",
                                  "bool"])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 3, 33)])
def test_roundtrip_dtypes(name, shape, rng):
    vals = rng.uniform(-5, 5, size=shape)
    t = from_values(vals, name)
    back = roundtrip(t)
    same(t, back)


def test_bfloat16_special_values_bit_exact():
    t = ampc.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"),
                     1e-40, 3.0e38]).bfloat16()
    np.testing.assert_array_equal(bits(roundtrip(t)), bits(t))


def test_requires_grad_and_parameter_kept():
    leaf = ampc.randn(3, requires_grad=True)
    p = nn.Parameter(ampc.randn(2, 2))
    frozen = nn.Parameter(ampc.randn(2), requires_grad=False)
    out = roundtrip({"leaf": leaf, "p": p, "frozen": frozen})
    same(leaf.detach().requires_grad_(), out["leaf"])
    assert out["leaf"].is_leaf
    assert isinstance(out["p"], nn.Parameter) and out["p"].requires_grad
    assert isinstance(out["frozen"], nn.Parameter)
    assert not out["frozen"].requires_grad


def test_views_saved_compactly():
    big = ampc.randn(1000, 100)
    col = big[:, 3]                     # 1000 elements, stride 100
    tr = big[:10, :20].t()              # a transposed block
    buf = io.BytesIO()
    ampc.save({"col": col, "tr": tr}, buf)
    assert len(buf.getvalue()) < 1000 * 4 + 200 * 4 + 2048
    out = ampc.load(io.BytesIO(buf.getvalue()))
    np.testing.assert_array_equal(to64(out["col"]), to64(col))
    np.testing.assert_array_equal(to64(out["tr"]), to64(tr))
    assert out["tr"].shape == (20, 10) and out["tr"].is_contiguous()


def test_containers_and_shared_tensors():
    t = ampc.arange(6.0)
    od = collections.OrderedDict([("z", 1), ("a", t), ("m", [t, (2.5, None)])])
    obj = {"od": od, "s": "text", "b": b"\x00\x01", "set": {1, 2},
           "dtype": ampc.bfloat16, "dev": ampc.device("cpu"),
           "size": ampc.zeros(2, 3).shape, "c": 1 + 2j, "flag": True}
    out = roundtrip(obj)
    assert type(out["od"]) is collections.OrderedDict
    assert list(out["od"]) == ["z", "a", "m"]
    assert out["od"]["a"] is out["od"]["m"][0]       # saved once
    assert out["od"]["m"][1] == (2.5, None)
    assert out["s"] == "text" and out["b"] == b"\x00\x01"
    assert out["set"] == {1, 2} and out["c"] == 1 + 2j and out["flag"]
    assert out["dtype"] is ampc.bfloat16
    assert out["dev"] == ampc.device("cpu")
    assert isinstance(out["size"], ampc.Size) and out["size"] == (2, 3)


def test_path_and_pathlib(tmp_path):
    sd = collections.OrderedDict(w=ampc.randn(4, 3), b=ampc.zeros(3))
    p = tmp_path / "ckpt.pt"
    ampc.save(sd, p)
    out = ampc.load(str(p))
    assert list(out) == ["w", "b"]
    same(sd["w"], out["w"])
    with open(p, "rb") as fh:
        same(sd["b"], ampc.load(fh)["b"])
    assert os.listdir(tmp_path) == ["ckpt.pt"]      # no temp files left


def test_module_state_dict_roundtrip(tmp_path):
    a = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))
    a.bfloat16()
    ampc.save(a.state_dict(), tmp_path / "m.pt")
    b = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))
    b.bfloat16()
    b.load_state_dict(ampc.load(tmp_path / "m.pt"))
    for (ka, va), (kb, vb) in zip(a.state_dict().items(),
                                  b.state_dict().items()):
        assert ka == kb
        same(va, vb)


def test_optimizer_state_dict_roundtrip():
    w = nn.Parameter(ampc.randn(3))
    opt = ampc.optim.SGD([w], lr=0.1, momentum=0.9)
    opt.state[w]["momentum_buffer"] = ampc.ones(3)
    sd = roundtrip(opt.state_dict())
    assert sd["param_groups"][0]["params"] == [0]
    assert sd["param_groups"][0]["lr"] == 0.1
    same(ampc.ones(3), sd["state"][0]["momentum_buffer"])


def test_map_location():
    t = ampc.randn(3)
    same(t, roundtrip(t, map_location="cpu"))
    same(t, roundtrip(t, map_location=ampc.device("cpu")))
    same(t, roundtrip(t, map_location={"cuda:0": "cpu"}))
    seen = []

    def fn(tensor, location):
        seen.append(location)
        return tensor * 2

    out = roundtrip(t, map_location=fn)
    assert seen == ["cpu"]
    np.testing.assert_allclose(to64(out), 2 * to64(t))


def test_cuda_tensor_on_cpu_only_machine_is_clear():
    if ampc.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="map_location"):
        serialization._target_device(None, "cuda:0", "'x.pt'")
    assert serialization._target_device("cpu", "cuda:0", "'x.pt'") == "cpu"


# ----------------------------------------------------------------------------
# atomic writes


def test_failed_save_leaves_old_file(tmp_path, monkeypatch):
    path = tmp_path / "model.pt"
    ampc.save({"w": ampc.ones(3)}, path)
    before = path.read_bytes()

    def crash(fh, chunks):
        fh.write(chunks[0])
        fh.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(serialization, "_write_chunks", crash)
    with pytest.raises(OSError, match="disk full"):
        ampc.save({"w": ampc.zeros(1000)}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.pt"]     # the temp file is gone
    same(ampc.ones(3), ampc.load(path)["w"])


def test_killed_process_mid_save_leaves_old_file(tmp_path):
    path = tmp_path / "model.pt"
    ampc.save({"w": ampc.ones(3)}, path)
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import os
        import ampc
        from ampc import serialization

        def die(fh, chunks):
            fh.write(chunks[0])
            fh.write(b"x" * 1000)
            fh.flush()
            os._exit(3)        # no cleanup, as a kill or a power cut

        serialization._write_chunks = die
        ampc.save({{"w": ampc.zeros(100000)}}, {str(path)!r})
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True,
                       timeout=60)
    assert r.returncode == 3, r.stderr.decode()
    assert path.read_bytes() == before
    same(ampc.ones(3), ampc.load(path)["w"])


# ----------------------------------------------------------------------------
# refused files


def saved_bytes(obj):
    buf = io.BytesIO()
    ampc.save(obj, buf)
    return buf.getvalue()


def test_truncated_file_is_refused(tmp_path):
    data = saved_bytes({"w": ampc.randn(100)})
    for cut in (3, 20, 40, len(data) - 1):
        p = tmp_path / f"cut{cut}.pt"
        p.write_bytes(data[:cut])
        with pytest.raises(RuntimeError, match="truncated") as e:
            ampc.load(p)
        assert f"cut{cut}.pt" in str(e.value)


def test_damaged_file_is_refused(tmp_path):
    data = bytearray(saved_bytes({"w": ampc.randn(100)}))
    data[-5] ^= 0x40
    p = tmp_path / "bad.pt"
    p.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="corrupted.*CRC") as e:
        ampc.load(p)
    assert "bad.pt" in str(e.value)
    p.write_bytes(saved_bytes(1) + b"junk")
    with pytest.raises(RuntimeError, match="unexpected bytes"):
        ampc.load(p)


def test_foreign_files_are_refused(tmp_path):
    cases = {
        "plain.pkl": (pickle.dumps({"w": [1.0, 2.0]}), "pickle"),
        "image.png": (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "PNG"),
        "torch.pt": (b"PK\x03\x04" + b"\x00" * 64, "zip"),
        "empty.pt": (b"", "not an ampc checkpoint"),
        "text.txt": (b"hello world, not a checkpoint", "not an ampc"),
    }
    for name, (data, hint) in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(RuntimeError, match="not an ampc checkpoint") \
                as e:
            ampc.load(p)
        assert name in str(e.value) and hint in str(e.value)


def test_newer_format_version_is_refused(tmp_path):
    data = bytearray(saved_bytes(1))
    data[8] = 99
    p = tmp_path / "new.pt"
    p.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="version 99.*newer"):
        ampc.load(p)


def test_disallowed_types_refused_by_default():
    data = saved_bytes({"obj": Opaque(3), "w": ampc.ones(1)})
    with pytest.raises(pickle.UnpicklingError,
                       match="weights_only=False") as e:
        ampc.load(io.BytesIO(data))
    assert "Opaque" in str(e.value)
    out = ampc.load(io.BytesIO(data), weights_only=False)
    assert isinstance(out["obj"], Opaque) and out["obj"].v == 3


def test_code_executing_pickle_refused():
    data = saved_bytes([CallsGetcwd()])
    with pytest.raises(pickle.UnpicklingError, match="posix.getcwd|getcwd"):
        ampc.load(io.BytesIO(data))


def test_bad_arguments():
    with pytest.raises(TypeError, match="path.*or a binary file"):
        ampc.save(ampc.ones(1), 42)
    with pytest.raises(TypeError, match="binary mode"):
        ampc.load(io.StringIO("text"))
