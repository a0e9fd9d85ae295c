"""`bench --sections pretrain`: the first twins' step, transformers' and the gen2 step in one run (tiny shape)."""

from berteval.bench import pretrain


def test_the_three_steps_are_timed_side_by_side():
    res = pretrain.measure(threads=1, batch=2, length=16, rounds=1, steps=1, log=lambda *a: None, vocab=64,
                           shape={"hidden_size": 16, "layers": 1, "heads": 2, "intermediate_size": 32}, big_batch=4)
    assert [r["path"] for r in res["rows"]] == ["berteval", "transformers", "berteval gen2"]
    assert all(r["tokens_per_s"] > 0 and r["loss"] > 0 for r in res["rows"])
    assert res["gen2_batch"] == 4 and res["gen2_speedup"] > 0
    text = pretrain.format_pretrain(res)
    assert "gen2 recipe's step (batch 4 x 16, no dropout)" in text
