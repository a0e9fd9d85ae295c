"""The span-QA regimes, scored on the official SQuAD v1.1 dev set through one evaluation path:
- probe: the encoder frozen, only the span head (`Linear(hidden, 2)`) trained, on hidden
  states computed once;
- finetune: LoRA adapters on every encoder linear layer (peft) plus the span head,
  trained together; the adapter is small enough to commit and is what the app loads
  (`finetune-lora-plus` and `finetune-full` are the same loop with another tuning,
  `berteval.regimes.tuning`: which weights move and what is saved);
- pretrained: a checkpoint's own trained QA head, no training (refused without one).
Training reads the training questions available (offline: the 3,939-question subset,
said in every record); evaluation runs every dev question through its windows and
writes the official predictions format (question id -> answer text). A cell is a seed.
Torch-free at import time (the registry imports this module).
"""

from __future__ import annotations

from .. import precision
from ..errors import BertevalError
from ..qa import DEFAULTS, QASettings
from . import tuning
from .base import TRAIN_OPTIONS, Cell, CellRegime, CellResult, Contract, Prepared, hyperparameters

SPAN = "span"  # what the head reads, in the record's pooling field: every token
# The probe's other head (`qa.vector`): what it trains, in the identity of its cells only (pooling = the vector read).
VECTOR_TRAINED = ("span head reading one pooled vector of the window (Linear(width, 2 x max_length): start and end "
                  "as choices among positions), on the frozen encoder")
LORA = tuning.LORA.lora  # the committed adapter's LoRA settings (the `lora` tuning)
TRAIN_DEFAULTS = {"probe": {"epochs": 3.0, "lr": 5e-3, "batch_size": 32}}


def settings(run) -> QASettings:
    s = run.spec
    return QASettings(run.max_length, s.doc_stride or DEFAULTS.doc_stride, s.n_best or DEFAULTS.n_best,
                      s.max_answer_length or DEFAULTS.max_answer_length)


QA_OPTIONS = ("limit_train", "doc_stride", "n_best", "max_answer_length", "train_set")  # what every span regime reads


class _SpanRegime(CellRegime):
    """Shared by the three: data, identity, evaluation and the record's config. `prepare` keeps the QA settings
    ("qa") and the training windows ("windows") in `state`, beside what a regime computes once."""

    contract = Contract(options=(*QA_OPTIONS, *TRAIN_OPTIONS), cell=("n_train",), optional=("bf16", "processes"))
    trained = True
    # Span heads on a frozen encoder keep little for the backward pass; a fine-tune keeps every layer's
    # activations unless they are recomputed (`training.TrainConfig.activation_checkpointing`: same weights,
    # bit for bit, so it is not part of the run's identity).
    checkpoint_activations = False

    def describe(self) -> dict:
        return {}

    def train_defaults(self, run) -> dict:
        return TRAIN_DEFAULTS[run.spec.regime]

    def hyperparameters(self, run) -> dict:
        return hyperparameters(run.spec, self.train_defaults(run))

    def cells(self, run) -> list[Cell]:
        return [Cell(SPAN, -1, seed) for seed in run.spec.seeds]

    def protocol(self, run, cell: Cell, train) -> dict:
        qa = settings(run)
        extra = {**self.describe(), **self.hyperparameters(run), "batches": "length-grouped"} if self.trained \
            else self.describe()
        return {"doc_stride": qa.doc_stride, "n_best": qa.n_best, "max_answer_length": qa.max_answer_length, **extra}

    def prepare(self, run, todo: list[Cell]) -> Prepared:
        train, dev, sha = self.splits(run)
        qa = settings(run)
        prep = Prepared(run, train, dev, sha, {"qa": qa})
        if self.trained:
            from ..qa.windows import make_windows

            ex = [i for i, gold in enumerate(train.labels) if gold.texts]
            prep.state["windows"] = make_windows(
                run.model.tokenizer, [train.texts[i][0] for i in ex], [train.texts[i][1] for i in ex],
                max_length=qa.max_length, doc_stride=qa.doc_stride,
                answer_starts=[train.labels[i].starts[0] for i in ex], answer_texts=[train.labels[i].texts[0] for i in ex])
        return prep

    def evaluate(self, prep: Prepared, model, run_id: str, config: dict, train_wall: float,
                 n_train: int, *, own_precision: bool = False) -> CellResult:
        """Every dev question through its windows: metrics, official predictions, n-best (kept local).
        `own_precision`: the model applies the dtype inside (`qa.vector.VectorQA`)."""
        import time

        from ..qa.inference import spans_streamed

        run, dev, qa = prep.run, prep.evals, prep.state["qa"]
        t0 = time.perf_counter()
        nbest, n_windows = spans_streamed(model, run.model.tokenizer, [q for q, _ in dev.texts],
                                          [c for _, c in dev.texts], qa, run.spec.dtype, progress=run.spec.progress,
                                          how=None if own_precision else self.bf16_path)
        wall = time.perf_counter() - t0
        predictions = {qid: (c[0].text if c else "") for qid, c in zip(dev.ids, nbest)}
        metrics = run.score(predictions=predictions, golds={qid: list(g.texts) for qid, g in zip(dev.ids, dev.labels)})
        run.store.write_json(f"predictions/{run.task.name}/nbest/{run_id}.json", {  # large: not committed
            qid: [{"text": c.text, "probability": round(c.probability, 5), "score": round(c.score, 4),
                   "start_char": c.start_char} for c in cands] for qid, cands in zip(dev.ids, nbest)})
        timing = {"eval_wall_s": round(wall, 2), "n_eval_windows": n_windows}
        return CellResult(
            metrics={k: round(v, 4) for k, v in metrics.items()}, data_sha256=prep.data_sha, split=dev.name,
            n_train=n_train, n_eval=len(dev), predictions=predictions,
            config={"data_source": run.data.source, "train_source": run.data.details.get("train_source"),
                    "max_seq_length": qa.max_length, "doc_stride": qa.doc_stride, "n_best": qa.n_best,
                    "max_answer_length": qa.max_answer_length, "limit_eval": run.spec.limit_eval, **config, **timing,
                    **precision.identity(run.spec.dtype, self.bf16_path)},
            wall_s=train_wall + timing["eval_wall_s"])

    def train(self, prep: Prepared, cell: Cell, run_id: str, module, dataset, collate, loss) -> tuple:
        """One seeded, resumable training run; returns (TrainResult, TrainConfig, config entries)."""
        import numpy as np

        from .. import training
        from ..config import cache_dir

        run, tw = prep.run, prep.state["windows"]
        hp = self.hyperparameters(run)
        cfg = training.TrainConfig(epochs=hp["epochs"], batch_size=hp["batch_size"], lr=hp["lr"], seed=cell.seed,
                                   dtype=run.spec.dtype, checkpoint_dir=cache_dir() / "checkpoints" / run_id,
                                   activation_checkpointing=self.checkpoint_activations
                                   and run.spec.activation_checkpointing)
        res = training.train(module, dataset, collate, loss, cfg, progress=run.spec.progress,
                             lengths=[len(f["input_ids"]) for f in tw.features])
        if res.resumed_from_step:
            run.note(f"seed {cell.seed}: resumed training from step {res.resumed_from_step}")
        training.release_memory()  # training's state is gone; evaluation starts from a trimmed heap
        losses = res.losses
        config = {"training": {**self.describe(), **hp, "batches": "length-grouped", "steps": res.steps,
                               "activation_checkpointing": cfg.activation_checkpointing,
                               **({"mmap_threshold_mb": training.MMAP_THRESHOLD >> 20} if res.lean_heap else {}),
                               "examples_seen": res.examples_seen, "train_wall_s": round(res.wall_s, 1),
                               "first_loss": round(losses[0], 4) if losses else None,
                               "last_loss": round(float(np.mean(losses[-20:])), 4) if losses else None,
                               "resumed_from_step": res.resumed_from_step, "peak_rss_mb": round(res.peak_rss_mb, 1),
                               **({"segments": res.segments} if len(res.segments) > 1 else {})},
                  "n_train_windows": len(tw), "train_windows_with_answer": round(float((tw.start_positions > 0).mean()), 4)}
        return res, cfg, config


def _encoded(run, windows: int, wall: float) -> None:
    """The probe's one encoder pass over the training windows, in the run's report (what `run` prints)."""
    run.report.encoded_examples += windows
    run.report.encode_wall_s += wall
    run.report.encoded_unit = "training windows"


class SpanProbe(_SpanRegime):
    """The per-token span head on cached hidden states; with --pooling, a span head that reads one pooled
    vector of the window instead (`qa.vector`), to measure what a classifier's single vector loses."""

    contract = Contract(options=("poolings", *QA_OPTIONS, *TRAIN_OPTIONS), cell=("n_train",),
                        optional=("bf16", "processes"))

    def describe(self) -> dict:
        return {"trained": "span head only, on the frozen encoder's cached hidden states"}

    def cells(self, run) -> list[Cell]:
        if not run.spec.poolings:
            return super().cells(run)
        from .. import pooling

        trained = [p for p in run.spec.poolings if pooling.POOLINGS[p].trained]
        if trained:
            raise BertevalError(f"the one-vector span head reads a fixed pooling of the last layer: drop "
                                f"{', '.join(trained)} (a pooling with parameters of its own)")
        return [Cell(p, -1, seed) for p in run.spec.poolings for seed in run.spec.seeds]

    def protocol(self, run, cell: Cell, train) -> dict:
        ident = super().protocol(run, cell, train)
        if cell.pooling != SPAN:  # the per-token cells keep the identity (and run ids) they always had
            ident.update(pooling=cell.pooling, trained=VECTOR_TRAINED)
        return ident

    def prepare(self, run, todo: list[Cell]) -> Prepared:
        from .grid import check_poolings

        prep = super().prepare(run, todo)
        vector = [c for c in todo if c.pooling != SPAN]
        if vector:
            check_poolings(run, vector)
            prep.state["poolings"] = list(dict.fromkeys(c.pooling for c in vector))
        return prep

    def fit_predict(self, prep: Prepared, cell: Cell, run_id: str) -> CellResult:
        import time

        import torch

        if cell.pooling != SPAN:
            return self._fit_vector(prep, cell, run_id)

        from .. import training
        from ..qa.heads import SpanHead, WindowSet, hidden_collate, hidden_states
        from ..qa.inference import head_model

        run, windows = prep.run, prep.state["windows"]
        torch.manual_seed(cell.seed)  # the heads' initialisation; sampling uses its own generators
        model = head_model(run.model)
        if "hidden" not in prep.state:  # one forward pass over the training windows serves every seed
            t0 = time.perf_counter()
            prep.state["hidden"] = hidden_states(run.model.tokenizer, model, windows, run.spec.dtype)
            prep.state["hidden_wall_s"] = round(time.perf_counter() - t0, 1)
            _encoded(run, len(windows), time.perf_counter() - t0)
        head = SpanHead(torch.nn.Linear(model.config.hidden_size, 2))
        res, cfg, config = self.train(prep, cell, run_id, head, WindowSet(windows),
                                      hidden_collate(prep.state["hidden"], windows), lambda m, b: m(**b))
        model.qa_outputs.load_state_dict(getattr(head, "module", head).qa_outputs.state_dict())
        config["hidden_states_wall_s"] = prep.state["hidden_wall_s"]  # the one forward pass over train
        result = self.evaluate(prep, model, run_id, config, res.wall_s, len(prep.train))
        result.cleanup = lambda: training.clear_checkpoint(cfg)
        return result

    def _fit_vector(self, prep: Prepared, cell: Cell, run_id: str) -> CellResult:
        """The one-vector span head: the training windows pooled once (every pooling of the run), a head per
        cell, and the per-token head's evaluation path (dev pooled once too, see `qa.vector.VectorQA`)."""
        import time

        import torch

        from .. import training
        from ..qa.heads import WindowSet
        from ..qa.vector import VectorQA, VectorSpanHead, pooled_windows, position_masks, vector_collate

        run, state = prep.run, prep.state
        windows, max_length = state["windows"], state["qa"].max_length
        if "vectors" not in state:
            t0 = time.perf_counter()
            state["vectors"] = pooled_windows(run.model, windows, state["poolings"], run.spec.dtype)
            state["masks"] = position_masks(windows, max_length)  # (W, L)
            state["vectors_wall_s"] = round(time.perf_counter() - t0, 1)
            _encoded(run, len(windows), time.perf_counter() - t0)
        torch.manual_seed(cell.seed)  # the head's initialisation; batches use their own generators
        vectors = state["vectors"][cell.pooling]  # (W, width)
        head = VectorSpanHead(vectors.shape[1], max_length)
        res, cfg, config = self.train(prep, cell, run_id, head, WindowSet(windows),
                                      vector_collate(vectors, state["masks"], windows), lambda m, b: m(**b))
        config["training"]["trained"] = VECTOR_TRAINED
        memo = state.setdefault("dev_memo", {})
        config.update(pooled_windows_wall_s=state["vectors_wall_s"], vector_width=int(vectors.shape[1]),
                      dev_vectors="reused from an earlier cell of this run" if memo else
                      f"encoded in this cell, with every pooling of the run ({', '.join(state['poolings'])})")
        model = VectorQA(run.model, cell.pooling, getattr(head, "module", head), state["poolings"], run.spec.dtype, memo)
        result = self.evaluate(prep, model, run_id, config, res.wall_s, len(prep.train), own_precision=True)
        result.cleanup = lambda: training.clear_checkpoint(cfg)
        return result


class SpanFinetune(_SpanRegime):
    """Encoder and span head trained together; the tuning (`berteval.regimes.tuning`) says which weights move
    and what is saved: LoRA (the `finetune` regime), LoRA plus biases and LayerNorms, or every weight."""

    contract = Contract(options=(*QA_OPTIONS, *TRAIN_OPTIONS, "activation_checkpointing", "folds"), cell=("n_train",),
                        optional=("processes", "folds"))
    bf16_path = precision.MIXED  # trained: autocast over fp32 weights, in training and in the evaluation after it
    checkpoint_activations = True  # issue 17: a SQuAD fine-tune peaked at 12-13 GB keeping them

    def __init__(self, tuned: tuning.Tuning = tuning.LORA):
        self.tuning = tuned

    def describe(self) -> dict:
        return self.tuning.describe()

    def train_defaults(self, run) -> dict:
        return self.tuning.defaults

    def fit(self, prep: Prepared, cell: Cell, run_id: str, save: bool = True) -> tuple:
        """Train one seed on `prep`'s windows and save the tuning's artifact (when `save` and it keeps one):
        (the trained model, ready to predict; config entries; training wall seconds; checkpoint cleanup)."""
        import torch

        from .. import training
        from ..qa.heads import WindowSet, qa_loss, window_collate
        from ..qa.inference import head_model

        run, windows = prep.run, prep.state["windows"]
        torch.manual_seed(cell.seed)  # LoRA's and the head's initialisation
        model = self.tuning.build(head_model(run.model))
        res, cfg, config = self.train(prep, cell, run_id, model, WindowSet(windows),
                                      window_collate(run.model.tokenizer, windows), qa_loss)
        trained = getattr(model, "module", model)
        adapter_rel = run.store.adapter_dir(run.task.name, run_id)
        info = {"base_model_arg": run.spec.model, "base_model": run.model.model_id, "base_revision": run.model.revision,
                "run_id": run_id, "lora": self.tuning.lora,
                "summary": f"{run.model.model_id}, {len(prep.train)} train questions, seed {cell.seed}"}
        if save and self.tuning.save(trained, run.store.root / adapter_rel, info):
            config["adapter_dir"] = adapter_rel
        elif not self.tuning.committable:  # the record's words, as every committed record has them
            config["artifact"] = f"none: the {self.tuning.name} recipe's weights are too large to commit"
        return self.tuning.for_eval(trained), config, res.wall_s, lambda: training.clear_checkpoint(cfg)

    def fit_predict(self, prep: Prepared, cell: Cell, run_id: str) -> CellResult:
        model, config, train_wall, cleanup = self.fit(prep, cell, run_id)
        result = self.evaluate(prep, model, run_id, config, train_wall, len(prep.train))
        result.cleanup = cleanup
        return result


class SpanPretrained(_SpanRegime):
    contract = Contract(options=QA_OPTIONS, cell=("n_train",), optional=("bf16", "processes"))
    trained = False

    def describe(self) -> dict:
        return {"trained": "none"}

    def cells(self, run) -> list[Cell]:
        if run.spec.seeds != [run.spec.seeds[0]]:
            run.note("a pretrained head has nothing to seed: one record, seed 0")
        return [Cell(SPAN, -1, 0)]

    def prepare(self, run, todo: list[Cell]) -> Prepared:
        from ..qa.inference import head_model

        prep = super().prepare(run, todo)
        prep.state["model"] = head_model(run.model, require_pretrained=True)
        return prep

    def fit_predict(self, prep: Prepared, cell: Cell, run_id: str) -> CellResult:
        return self.evaluate(prep, prep.state["model"], run_id, {"trained": "none: the checkpoint's own QA head"},
                             0.0, 0)
