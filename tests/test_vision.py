"""ampc.vision: the CIFAR-10 reader (files in the real format, written
here), its download (from a local HTTP server) and safety checks,
FakeCIFAR10, and the transforms against NumPy references and torch."""
import hashlib
import http.server
import io
import os
import pickle
import tarfile
import threading

import numpy as np
import pytest

import ampc
import ampc.vision as torchvision
import ampc.vision.transforms as T
from ampc.vision.datasets import CIFAR10, FakeCIFAR10
from helpers import torch_or_skip

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog",
           "horse", "ship", "truck"]
N_PER_BATCH = 7     # images per batch file in the small test folder


# ----------------------------------------------------------------------------
# a small CIFAR-10 folder in the real file format


def _batch_bytes(rng, n, str_keys=False):
    """A pickled CIFAR batch: a dict with b'data' (n, 3072) uint8 rows in
    CHW order and b'labels', as the real files read with bytes keys (or
    str keys, as Python 2's str reads with encoding='latin1')."""
    data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
    labels = rng.integers(0, 10, n).tolist()
    entry = {b"batch_label": b"training batch", b"labels": labels,
             b"data": data, b"filenames": [b"x.png"] * n}
    if str_keys:
        entry = {k.decode(): v for k, v in entry.items()}
    return pickle.dumps(entry, protocol=2), data, labels


def _meta_bytes():
    return pickle.dumps({b"num_cases_per_batch": N_PER_BATCH,
                         b"label_names": [c.encode() for c in CLASSES],
                         b"num_vis": 3072}, protocol=2)


def _cifar_files(seed=0):
    """{name: bytes} of all seven files, and the expected train/test
    (data, labels)."""
    rng = np.random.default_rng(seed)
    files, train_d, train_l = {}, [], []
    for k in range(1, 6):
        raw, d, lab = _batch_bytes(rng, N_PER_BATCH, str_keys=(k == 2))
        files[f"data_batch_{k}"] = raw
        train_d.append(d)
        train_l += lab
    raw, test_d, test_l = _batch_bytes(rng, N_PER_BATCH)
    files["test_batch"] = raw
    files["batches.meta"] = _meta_bytes()
    return files, (np.concatenate(train_d), train_l), (test_d, test_l)


def _write_folder(root, files):
    folder = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(folder, exist_ok=True)
    for name, raw in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(raw)
    return folder


def _hwc(rows):
    return rows.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)


def _md5(raw):
    return hashlib.md5(raw).hexdigest()


def _targz(members):
    """A .tar.gz in memory from [(name, bytes or TarInfo-modifier)]."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, raw in members:
            info = tarfile.TarInfo(name)
            if isinstance(raw, bytes):
                info.size = len(raw)
                tar.addfile(info, io.BytesIO(raw))
            else:
                raw(info)
                tar.addfile(info)
    return buf.getvalue()


def _archive(files):
    return _targz([(f"cifar-10-batches-py/{n}", raw)
                   for n, raw in files.items()])


def test_reader_values_labels_order(tmp_path):
    files, (train_x, train_y), (test_x, test_y) = _cifar_files()
    _write_folder(tmp_path, files)
    ds = torchvision.datasets.CIFAR10(str(tmp_path), train=True)
    assert len(ds) == 5 * N_PER_BATCH
    assert ds.data.shape == (5 * N_PER_BATCH, 32, 32, 3)
    assert ds.data.dtype == np.uint8
    np.testing.assert_array_equal(ds.data, _hwc(train_x))
    assert ds.targets == train_y and isinstance(ds.targets, list)
    assert ds.classes == CLASSES
    assert ds.class_to_idx["truck"] == 9
    img, target = ds[N_PER_BATCH + 3]            # from data_batch_2
    np.testing.assert_array_equal(img, _hwc(train_x)[N_PER_BATCH + 3])
    assert target == train_y[N_PER_BATCH + 3] and type(target) is int
    img[...] = 0                                 # items are copies
    assert ds.data[N_PER_BATCH + 3].any()
    test = CIFAR10(tmp_path, train=False)
    np.testing.assert_array_equal(test.data, _hwc(test_x))
    assert test.targets == test_y
    assert "Number of datapoints: 7" in repr(test)


def test_reader_transforms(tmp_path):
    files, (train_x, train_y), _ = _cifar_files()
    _write_folder(tmp_path, files)
    ds = CIFAR10(tmp_path, transform=T.ToTensor(),
                 target_transform=lambda y: y + 100)
    x, y = ds[4]
    assert x.shape == (3, 32, 32) and x.dtype is ampc.float32
    np.testing.assert_array_equal(
        x.numpy(), train_x[4].reshape(3, 32, 32).astype(np.float32) / 255)
    assert y == train_y[4] + 100


def test_missing_data_says_where_to_put_it(tmp_path):
    with pytest.raises(RuntimeError) as e:
        CIFAR10(tmp_path / "nowhere")
    msg = str(e.value)
    assert os.path.join(str(tmp_path), "nowhere", "cifar-10-batches-py") \
        in msg
    for name in ("data_batch_1", "data_batch_5", "test_batch",
                 "batches.meta", "cifar-10-python.tar.gz", "download=True",
                 "FakeCIFAR10"):
        assert name in msg


def test_truncated_file_is_named(tmp_path):
    files, _, _ = _cifar_files()
    files["data_batch_3"] = files["data_batch_3"][:5000]
    _write_folder(tmp_path, files)
    with pytest.raises(RuntimeError, match="data_batch_3.*truncated"):
        CIFAR10(tmp_path)


@pytest.mark.parametrize("payload,why", [
    ({b"data": np.zeros((7, 100), np.uint8), b"labels": [0] * 7},
     "uint8 array"),
    ({b"data": np.zeros((7, 3072), np.uint8), b"labels": [0] * 6},
     "one label per image"),
    ({b"data": np.zeros((7, 3072), np.uint8), b"labels": [12] * 7},
     "labels should be in"),
    ([1, 2, 3], "not a dict"),
])
def test_foreign_file_is_named(tmp_path, payload, why):
    files, _, _ = _cifar_files()
    files["data_batch_4"] = pickle.dumps(payload, protocol=2)
    _write_folder(tmp_path, files)
    with pytest.raises(RuntimeError, match=f"data_batch_4.*{why}"):
        CIFAR10(tmp_path)


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_pickle_with_code_is_refused(tmp_path):
    files, _, _ = _cifar_files()
    files["data_batch_1"] = pickle.dumps({b"data": _Evil()}, protocol=2)
    _write_folder(tmp_path, files)
    with pytest.raises(RuntimeError, match="data_batch_1.*refusing"):
        CIFAR10(tmp_path)


# ----------------------------------------------------------------------------
# download, against a local HTTP server


class _Server:
    """http.server in a thread, serving ``files`` {path: bytes}; counts
    the requests."""

    def __init__(self, files):
        self.files = files
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests.append(self.path)
                body = outer.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       args=(0.05,), daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server({})
    yield s
    s.close()


def _local_cifar(server, files, archive=None, archive_md5=None):
    """A CIFAR10 subclass that downloads from the local server, with the
    MD5s of these files."""
    archive = _archive(files) if archive is None else archive
    archive_md5 = archive_md5 or _md5(archive)
    server.files["/cifar.tar.gz"] = archive

    class LocalCIFAR10(CIFAR10):
        url = server.url("/cifar.tar.gz")
        tgz_md5 = archive_md5
        train_list = [[f"data_batch_{k}", _md5(files[f"data_batch_{k}"])]
                      for k in range(1, 6)]
        test_list = [["test_batch", _md5(files["test_batch"])]]
        meta = {"filename": "batches.meta", "key": "label_names",
                "md5": _md5(files["batches.meta"])}
    return LocalCIFAR10


def test_download_then_reuse(tmp_path, server, capsys):
    files, (train_x, _), _ = _cifar_files()
    cls = _local_cifar(server, files)
    ds = cls(tmp_path, train=True, download=True)
    np.testing.assert_array_equal(ds.data, _hwc(train_x))
    assert server.requests == ["/cifar.tar.gz"]
    assert "Downloading cifar-10-python.tar.gz" in capsys.readouterr().err
    assert os.path.isfile(tmp_path / "cifar-10-python.tar.gz")
    # Files present: download=True fetches nothing.
    cls(tmp_path, train=False, download=True)
    assert server.requests == ["/cifar.tar.gz"]
    # No scratch folders left behind.
    assert sorted(os.listdir(tmp_path)) == ["cifar-10-batches-py",
                                            "cifar-10-python.tar.gz"]


def test_download_extracts_a_present_archive(tmp_path, server):
    files, _, _ = _cifar_files()
    cls = _local_cifar(server, files)
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(
        server.files["/cifar.tar.gz"])
    assert len(cls(tmp_path, download=True)) == 5 * N_PER_BATCH
    assert server.requests == []


def test_download_url_from_environment(tmp_path, server, monkeypatch):
    files, _, _ = _cifar_files()
    cls = _local_cifar(server, files)
    server.files["/mirror/c.tgz"] = server.files.pop("/cifar.tar.gz")
    monkeypatch.setenv("AMPC_CIFAR10_URL", server.url("/mirror/c.tgz"))
    cls(tmp_path, download=True)
    assert server.requests == ["/mirror/c.tgz"]


def test_download_rejects_archive_checksum(tmp_path, server):
    files, _, _ = _cifar_files()
    cls = _local_cifar(server, files, archive_md5="0" * 32)
    with pytest.raises(RuntimeError, match="MD5 .* expected 0{32}"):
        cls(tmp_path, download=True)
    assert not os.path.exists(tmp_path / "cifar-10-python.tar.gz")
    assert not os.path.exists(tmp_path / "cifar-10-batches-py")


def test_download_rejects_file_checksum(tmp_path, server):
    files, _, _ = _cifar_files()
    cls = _local_cifar(server, files)
    cls.train_list = [list(e) for e in cls.train_list]
    cls.train_list[2][1] = "f" * 32
    with pytest.raises(RuntimeError, match="data_batch_3 .* MD5"):
        cls(tmp_path, download=True)
    assert not os.path.exists(tmp_path / "cifar-10-batches-py")


@pytest.mark.parametrize("member", [
    ("../escaped", b"x"),
    ("/tmp/ampc-absolute-escape", b"x"),
    ("cifar-10-batches-py/../../escaped", b"x"),
    ("cifar-10-batches-py/link",
     lambda i: (setattr(i, "type", tarfile.SYMTYPE),
                setattr(i, "linkname", "/etc/passwd"))),
    ("cifar-10-batches-py/hard",
     lambda i: (setattr(i, "type", tarfile.LNKTYPE),
                setattr(i, "linkname", "cifar-10-batches-py/test_batch"))),
])
def test_download_refuses_escaping_members(tmp_path, server, member):
    files, _, _ = _cifar_files()
    archive = _targz([(f"cifar-10-batches-py/{n}", raw)
                      for n, raw in files.items()] + [member])
    root = tmp_path / "root"
    cls = _local_cifar(server, files, archive=archive)
    with pytest.raises(RuntimeError, match="refusing to extract"):
        cls(root, download=True)
    assert not os.path.exists(tmp_path / "escaped")
    assert not os.path.exists("/tmp/ampc-absolute-escape")
    assert not os.path.exists(root / "cifar-10-batches-py")


def test_download_unreachable_says_where_to_put_it(tmp_path, server):
    files, _, _ = _cifar_files()
    cls = _local_cifar(server, files)
    cls.url = server.url("/missing.tar.gz")
    with pytest.raises(RuntimeError) as e:
        cls(tmp_path, download=True)
    msg = str(e.value)
    assert "could not download" in msg and "cifar-10-batches-py" in msg
    assert "data_batch_1" in msg


# ----------------------------------------------------------------------------
# FakeCIFAR10


def test_fake_shapes_and_interface():
    ds = FakeCIFAR10(train=False)
    assert len(ds) == 10000
    assert ds.data.shape == (10000, 32, 32, 3) and ds.data.dtype == np.uint8
    assert isinstance(ds.targets, list) and set(ds.targets) == set(range(10))
    assert np.bincount(ds.targets).tolist() == [1000] * 10
    assert ds.classes == CLASSES
    img, target = ds[5]
    assert img.shape == (32, 32, 3) and type(target) is int
    x, y = FakeCIFAR10(size=3, transform=T.ToTensor(),
                       target_transform=str)[0]
    assert x.shape == (3, 32, 32) and isinstance(y, str)


def test_fake_default_train_size():
    assert len(FakeCIFAR10()) == 50000


def test_fake_deterministic():
    a = FakeCIFAR10(size=1500, seed=1)
    b = FakeCIFAR10(size=1500, seed=1)
    np.testing.assert_array_equal(a.data, b.data)
    assert a.targets == b.targets
    # A smaller set is a prefix of a larger one.
    c = FakeCIFAR10(size=2500, seed=1)
    np.testing.assert_array_equal(c.data[:1500], a.data)
    assert c.targets[:1500] == a.targets
    # Other seeds and the other split give other samples.
    assert not np.array_equal(FakeCIFAR10(size=1500, seed=2).data, a.data)
    assert not np.array_equal(
        FakeCIFAR10(size=1500, seed=1, train=False).data, a.data)


def test_fake_is_learnable():
    """Nearest class mean on raw pixels: far above chance (10%), though
    far from solved (the classes share colours in pairs)."""
    train = FakeCIFAR10(size=5000)
    test = FakeCIFAR10(size=2000, train=False)
    x = train.data.reshape(len(train), -1).astype(np.float64)
    y = np.asarray(train.targets)
    xt = test.data.reshape(len(test), -1).astype(np.float64)
    means = np.stack([x[y == c].mean(0) for c in range(10)])
    dist = (means ** 2).sum(1)[None] - 2 * xt @ means.T
    acc = (dist.argmin(1) == np.asarray(test.targets)).mean()
    assert acc > 0.15, acc
    # The class means really differ (in colour).
    assert np.ptp(means.reshape(10, 1024, 3).mean(1), axis=0).min() > 10


def test_fake_rejects_bad_arguments():
    with pytest.raises(ValueError, match="size"):
        FakeCIFAR10(size=-1)
    with pytest.raises(ValueError, match="seed"):
        FakeCIFAR10(size=1, seed=-2)


# ----------------------------------------------------------------------------
# transforms against NumPy references


@pytest.fixture
def img(rng):
    return rng.integers(0, 256, (13, 11, 3), dtype=np.uint8)


def test_to_tensor(img):
    t = T.ToTensor()(img)
    assert t.shape == (3, 13, 11) and t.dtype is ampc.float32
    ref = img.transpose(2, 0, 1).astype(np.float32) / np.float32(255)
    np.testing.assert_array_equal(t.numpy(), ref)
    gray = T.ToTensor()(img[:, :, 0])
    assert gray.shape == (1, 13, 11)
    # Other dtypes keep their values (float64 -> float32).
    f = T.ToTensor()(img.astype(np.float64) * 2)
    np.testing.assert_array_equal(f.numpy(), img.transpose(2, 0, 1) * 2.0)
    assert f.dtype is ampc.float32
    with pytest.raises(TypeError, match="already"):
        T.ToTensor()(t)
    with pytest.raises(TypeError, match="NumPy array"):
        T.ToTensor()([1, 2, 3])


def test_to_tensor_matches_torch(img):
    torch = torch_or_skip()
    ours = T.ToTensor()(img).numpy()
    theirs = torch.from_numpy(img).permute(2, 0, 1).float().div(255)
    np.testing.assert_array_equal(ours, theirs.numpy())


def test_normalize(img):
    x = T.ToTensor()(img)
    mean, std = (0.1, 0.5, 0.9), (0.2, 0.5, 1.5)
    out = T.Normalize(mean, std)(x)
    ref = (x.numpy().astype(np.float64) - np.array(mean)[:, None, None]) \
        / np.array(std)[:, None, None]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6, atol=1e-6)
    m32 = np.float32(mean)[:, None, None]
    s32 = np.float32(std)[:, None, None]
    np.testing.assert_array_equal(out.numpy(), (x.numpy() - m32) / s32)
    assert x.numpy().max() <= 1.0          # not in place by default
    same = T.Normalize(mean, std, inplace=True)(x)
    assert same is x
    np.testing.assert_array_equal(x.numpy(), out.numpy())
    batch = T.Normalize((0.5,), (0.25,))(ampc.ones(2, 3, 4, 5))
    assert batch.shape == (2, 3, 4, 5) and batch.numpy().max() == 2.0


def test_normalize_matches_torch(img):
    torch = torch_or_skip()
    x = T.ToTensor()(img)
    ours = T.Normalize((0.5, 0.4, 0.3), (0.2, 0.3, 0.4))(x).numpy()
    tx = torch.from_numpy(x.numpy().copy())
    m = torch.tensor([0.5, 0.4, 0.3]).view(-1, 1, 1)
    s = torch.tensor([0.2, 0.3, 0.4]).view(-1, 1, 1)
    np.testing.assert_array_equal(ours, tx.sub(m).div(s).numpy())


def test_normalize_other_dtypes_and_errors():
    x = ampc.full((3, 2, 2), 0.75).bfloat16()
    out = T.Normalize((0.25,) * 3, (0.5,) * 3)(x)
    assert out.dtype is ampc.bfloat16
    assert out.float().numpy().tolist() == [[[1.0, 1.0]] * 2] * 3
    with pytest.raises(ValueError, match="std evaluated to zero"):
        T.Normalize((0,), (0,))(ampc.ones(1, 2, 2))
    with pytest.raises(ValueError, match="2 values but the image has 3"):
        T.Normalize((0, 0), (1, 1))(ampc.ones(3, 2, 2))
    with pytest.raises(TypeError, match="float tensor"):
        T.Normalize((0,), (1,))(ampc.ones(1, 2, 2, dtype=ampc.int64))
    with pytest.raises(ValueError, match=r"\(\.\.\., C, H, W\)"):
        T.Normalize((0,), (1,))(ampc.ones(2, 2))
    with pytest.raises(TypeError, match="ToTensor first"):
        T.Normalize((0,), (1,))(np.zeros((2, 2, 3), np.float32))


def _crop_origin(out, padded):
    """The (i, j) at which ``out`` is a window of ``padded`` (HWC)."""
    th, tw = out.shape[:2]
    hits = [(i, j) for i in range(padded.shape[0] - th + 1)
            for j in range(padded.shape[1] - tw + 1)
            if np.array_equal(padded[i:i + th, j:j + tw], out)]
    assert hits, "the crop is no window of the padded image"
    return hits[0]


def test_random_crop_is_a_window_of_the_padded_image(img):
    ampc.manual_seed(3)
    crop = T.RandomCrop((9, 8), padding=2)
    padded = np.pad(img, ((2, 2), (2, 2), (0, 0)))
    origins = {_crop_origin(crop(img), padded) for _ in range(60)}
    assert len(origins) > 10            # many different windows
    assert max(i for i, _ in origins) <= 17 - 9
    out = crop(T.ToTensor()(img))       # tensors: (C, H, W)
    assert out.shape == (3, 9, 8)


@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric"])
def test_random_crop_padding_modes(img, mode):
    crop = T.RandomCrop((19, 15), padding=(2, 3), padding_mode=mode)
    ref = np.pad(img, ((3, 3), (2, 2), (0, 0)), mode=mode)
    np.testing.assert_array_equal(crop(img), ref)   # the only window


def test_random_crop_fill_and_pad_if_needed(img):
    crop = T.RandomCrop((13 + 4, 11 + 6), padding=(1, 2, 5, 2),
                        fill=(7, 8, 9))
    out = crop(img)
    np.testing.assert_array_equal(out[2:15, 1:12], img)
    assert (out[0, 0] == [7, 8, 9]).all() and (out[-1, -1] == [7, 8, 9]).all()
    big = T.RandomCrop(20, pad_if_needed=True, fill=5)(img)
    assert big.shape == (20, 20, 3) and (big == 5).sum() > 0
    with pytest.raises(ValueError, match="larger than input image size"):
        T.RandomCrop(14)(img)
    with pytest.raises(ValueError, match="padding_mode"):
        T.RandomCrop(4, padding_mode="wrap")
    with pytest.raises(TypeError, match="padding"):
        T.RandomCrop(4, padding=(1, 2, 3))


def test_random_crop_full_size_draws_nothing(img):
    before = ampc._C.get_rng_state()
    np.testing.assert_array_equal(T.RandomCrop((13, 11))(img), img)
    assert ampc._C.get_rng_state() == before


def test_random_horizontal_flip(img):
    np.testing.assert_array_equal(T.RandomHorizontalFlip(1.0)(img),
                                  img[:, ::-1])
    np.testing.assert_array_equal(T.RandomHorizontalFlip(0.0)(img), img)
    t = T.ToTensor()(img)
    np.testing.assert_array_equal(T.RandomHorizontalFlip(1.0)(t).numpy(),
                                  t.numpy()[:, :, ::-1])
    ampc.manual_seed(0)
    flip = T.RandomHorizontalFlip(0.3)
    n = sum(not np.array_equal(flip(img), img) for _ in range(400))
    assert 0.2 < n / 400 < 0.4
    with pytest.raises(ValueError, match="probability"):
        T.RandomHorizontalFlip(1.5)


def test_random_transforms_follow_the_seed(img):
    aug = T.Compose([T.RandomCrop(11, padding=3), T.RandomHorizontalFlip(),
                     T.ToTensor()])

    def run(seed):
        ampc.manual_seed(seed)
        return np.stack([aug(img).numpy() for _ in range(12)])

    np.testing.assert_array_equal(run(5), run(5))
    assert not np.array_equal(run(5), run(6))


def test_batched_crop_and_flip_match_per_image_rules(rng):
    """The DataLoader's batched forms: every image gets a valid window,
    all windows occur about equally often, flips happen with p."""
    x = rng.integers(0, 256, (4000, 6, 5, 3), dtype=np.uint8)
    ampc.manual_seed(1)
    out, _ = T.RandomCrop((4, 4), padding=1)._batch(x.copy(), False)
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    counts = {}
    for b in range(0, 4000, 40):
        o = _crop_origin(out[b], padded[b])
        counts[o] = counts.get(o, 0) + 1
    assert len(counts) == 5 * 4         # every (i, j) of 5 x 4 occurs
    chw = x.transpose(0, 3, 1, 2).copy()
    out_t, _ = T.RandomCrop((4, 4), padding=1)._batch(chw, True)
    assert out_t.shape == (4000, 3, 4, 4)
    flipped, _ = T.RandomHorizontalFlip(0.25)._batch(x.copy(), False)
    changed = (flipped != x).any(axis=(1, 2, 3))
    same_as_flip = (flipped == x[:, :, ::-1]).all(axis=(1, 2, 3))
    assert (changed <= same_as_flip).all()
    assert 0.2 < changed.mean() < 0.3


def test_compose_repr_and_order():
    calls = []
    c = T.Compose([lambda v: calls.append(1) or v + 1,
                   lambda v: calls.append(2) or v * 10])
    assert c(1) == 20 and calls == [1, 2]
    assert "ToTensor()" in repr(T.Compose([T.ToTensor()]))
