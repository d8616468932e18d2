"""get_rng_state / set_rng_state (and ampc.cuda's): a saved state replays
the same draws, through a checkpoint file too; bad states are refused."""
import pytest

import ampc


def test_a_saved_state_replays_every_kind_of_draw():
    ampc.manual_seed(2**64 - 5)             # a seed past int64 round-trips
    ampc.rand(7)
    state = ampc.get_rng_state()
    assert state.dtype is ampc.int64 and state.shape == (2,)
    first = [ampc.rand(5), ampc.randn(3, 3), ampc.randint(0, 9, (4,)),
             ampc.nn.functional.dropout(ampc.ones(33), 0.5)]
    ampc.set_rng_state(state)
    again = [ampc.rand(5), ampc.randn(3, 3), ampc.randint(0, 9, (4,)),
             ampc.nn.functional.dropout(ampc.ones(33), 0.5)]
    for a, b in zip(first, again):
        assert a.tolist() == b.tolist()
    assert ampc.initial_seed() == 2**64 - 5


def test_state_survives_a_checkpoint(tmp_path):
    ampc.manual_seed(3)
    ampc.randn(10)
    ampc.save({"rng": ampc.get_rng_state()}, tmp_path / "ckpt.pt")
    expected = ampc.randn(4).tolist()
    ampc.manual_seed(99)
    ampc.set_rng_state(ampc.load(tmp_path / "ckpt.pt")["rng"])
    assert ampc.randn(4).tolist() == expected


def test_the_state_is_a_copy():
    state = ampc.get_rng_state()
    before = state.tolist()
    ampc.rand(100)
    assert state.tolist() == before


def test_cuda_names_share_the_one_generator():
    ampc.manual_seed(1)
    state = ampc.cuda.get_rng_state()
    assert state.tolist() == ampc.get_rng_state().tolist()
    a = ampc.rand(4).tolist()
    ampc.cuda.set_rng_state_all(ampc.cuda.get_rng_state_all()[:0] + [state])
    assert ampc.rand(4).tolist() == a


@pytest.mark.parametrize("bad", [ampc.zeros(2), ampc.zeros(3,
                                                           dtype=ampc.int64),
                                 [1, 2], None])
def test_bad_states_are_refused(bad):
    with pytest.raises(TypeError, match="expected the state "
                       r"ampc.get_rng_state\(\) returns"):
        ampc.set_rng_state(bad)
