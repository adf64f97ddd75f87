"""`python -m cuxla bench models` and its child `python -m cuxla._zoo run`:
the row a model gives, the comparison behind its verdict, and rows rather
than a crashed parent when a model fails."""
import copy
import json
import math
import subprocess
import sys
import time
import types

import pytest
import torch

from cuxla import _zoo

ROW_KEYS = {"model", "class", "device", "verdict", "detail", "graphs", "xla_programs", "aten_ops", "xla_ops",
            "programs_per_graph", "xla_op_share", "compile_s", "xla_compile_s", "step_ms_eager", "step_ms_cuxla",
            "fallbacks", "losses_eager", "losses_cuxla", "max_loss_diff", "max_param_diff", "worst_param"}


def _run(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=timeout)


def test_the_ci_subset_trains_like_eager_in_whole_xla_programs(client, tmp_path):
    # A BERT encoder, a GPT-2 decoder, T5 and BART (seq2seq) and a Llama.
    if client.platform == "cpu" and torch.cuda.is_available():
        pytest.skip("the zoo runs on the GPU where there is one")
    result = _run("cuxla", "bench", "models", "--subset", "ci", "--jobs", "2", "--out", str(tmp_path),
                  timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    rows = json.loads((tmp_path / "models.json").read_text())["rows"]
    assert [r["model"] for r in rows] == _zoo.CI_SUBSET
    for row in rows:
        assert ROW_KEYS <= row.keys(), ROW_KEYS - row.keys()
        assert row["verdict"] == "pass", (row["model"], row["detail"], row.get("log_tail"))
        assert row["max_loss_diff"] <= 1e-4 and row["max_param_diff"] <= 1e-4, row["detail"]
        assert len(row["losses_eager"]) == len(row["losses_cuxla"]) == 3
        assert all(math.isfinite(x) for x in row["losses_eager"] + row["losses_cuxla"])
        assert row["losses_cuxla"][-1] < row["losses_cuxla"][0], "the loss went down"
        # Every graph one XLA program running all of its ops.
        assert row["graphs"] >= 2 and row["xla_programs"] == row["graphs"], row["model"]
        assert row["xla_op_share"] == 1.0 and row["xla_ops"] == row["aten_ops"] > 0 and row["fallbacks"] == []
        assert row["step_ms_eager"] > 0 and row["step_ms_cuxla"] > 0 and row["compile_s"] >= 0


def _pair(weight_scale=1.0, bias_shift=0.0, bias_grad=1.0):
    """Two trained Linear layers, b off from a as asked; their last gradients."""
    torch.manual_seed(0)
    a, b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        b.weight.mul_(weight_scale)
        b.bias.add_(bias_shift)
    for layer in (a, b):
        layer.weight.grad = torch.ones(4, 4)
        layer.bias.grad = torch.full((4,), bias_grad)
    return a, b


def test_parameter_comparison_finds_a_wrong_tensor():
    assert _zoo._compare_params(*_pair())["max_param_diff"] == 0.0
    wrong_weight = _zoo._compare_params(*_pair(weight_scale=1.01))
    assert wrong_weight["max_param_diff"] == pytest.approx(0.01, rel=1e-3), wrong_weight
    assert wrong_weight["worst_param"] == "weight"
    # A small tensor counts at the model's scale: 1e-3 off is 1e-3 of the largest weight or more.
    wrong_bias = _zoo._compare_params(*_pair(bias_shift=1e-3))
    assert wrong_bias["max_param_diff"] >= 1e-3 and wrong_bias["worst_param"] == "bias", wrong_bias


def test_a_tensor_with_a_rounding_noise_gradient_is_reported_but_not_counted():
    noise = _zoo._compare_params(*_pair(bias_shift=1e-3, bias_grad=1e-9))
    assert noise["noise_gradient_tensors"] == ["bias"], noise
    assert noise["max_param_diff"] == 0.0 and noise["worst_tensor"] == "bias"
    assert noise["max_param_diff_per_tensor"] > 1e-3


class _PicksItsPathInItsFirstStep(torch.nn.Module):
    """As BigBird does: its first forward changes an attribute Dynamo guards
    on, so its second step compiles again and its third does not."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)
        self.first = True

    def forward(self, x):
        y = self.linear(x)
        if self.first:
            self.first = False
            y = y * 2
        return types.SimpleNamespace(loss=y.square().mean())


def test_the_step_time_leaves_out_steps_that_compiled_again():
    torch._dynamo.reset()
    model = torch.compile(_PicksItsPathInItsFirstStep(), backend="cuxla")
    _, times, compiled = _zoo._train(model, {"x": torch.ones(2, 4)}, 3, lambda: None)
    assert compiled[0] >= 1 and compiled[1] >= 1 and compiled[2] == 0, compiled
    assert _zoo._steady_step(times, compiled) == (times[2], 1)
    # Where every later step compiled, their median stands, compiles and all.
    assert _zoo._steady_step([5.0, 4.0, 3.0], [1, 2, 1]) == (3.5, 2)
    assert _zoo._steady_step([5.0, 4.0, 3.0, 1.0], [1, 0, 0, 0]) == (3.0, 0)


def test_failing_models_give_rows_and_the_files_are_written(tmp_path):
    # BertModel has no loss (its eager run fails); the other name is no transformers class.
    result = _run("cuxla", "bench", "models", "--models", "NoSuchModelForMaskedLM,BertModel",
                  "--out", str(tmp_path), "--jobs", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {r["model"]: r for r in json.loads((tmp_path / "models.json").read_text())["rows"]}
    assert rows["NoSuchModelForMaskedLM"]["verdict"] == "not in transformers", rows
    assert rows["BertModel"]["verdict"] == "eager failed", rows
    assert rows["BertModel"]["detail"]
    table = (tmp_path / "models.md").read_text()
    assert "0 of 2 pass" in table and "| BertModel | eager failed |" in table
    assert (tmp_path / "models.png").stat().st_size > 1000
    assert "[ 2/2]" in result.stdout
    assert not (tmp_path / "models-partial.json").exists(), "a finished run keeps only its table"


def test_the_table_says_where_pytorch_allocated_from_xlas_pool(tmp_path):
    # CUXLA_ONE_POOL=1 is the child's setting: each row says whether its process ran on the pool.
    from cuxla._bench import writers

    def table(*pools):
        rows = [{"model": f"M{i}", "verdict": "pass", "detail": "", **pool} for i, pool in enumerate(pools)]
        writers.write_models(rows, 3, "zero", 1e-4, "float32", tmp_path)
        return (tmp_path / "models.md").read_text().splitlines()[0]

    assert "memory pool" not in table({"one_pool": False}, {})
    assert table({"one_pool": True}, {}).count(writers.ONE_POOL_SAID) == 1  # a timeout's row says nothing
    assert "XLA's memory pool in 1 of the 2 processes" in table({"one_pool": True}, {"one_pool": False})


def test_a_run_cut_short_leaves_the_rows_of_the_models_done(tmp_path):
    # A GPU call's time limit can end a sweep: what finished is on disk as it finishes.
    run = subprocess.Popen([sys.executable, "-m", "cuxla", "bench", "models", "--models",
                            "NoSuchModelForMaskedLM,BertForMaskedLM", "--jobs", "1", "--out", str(tmp_path)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = tmp_path / "models-partial.json"
    deadline = time.monotonic() + 120
    while not partial.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    run.kill()
    run.wait()
    rows = json.loads(partial.read_text())
    assert [r["model"] for r in rows] == ["NoSuchModelForMaskedLM"], rows
    assert not (tmp_path / "models.json").exists()


def test_a_child_past_its_time_is_killed_and_becomes_a_timeout_row(tmp_path):
    start = time.perf_counter()
    result = _run("cuxla", "bench", "models", "--models", "BertForMaskedLM", "--timeout", "1", "--out", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    row = json.loads((tmp_path / "models.json").read_text())["rows"][0]
    assert row["verdict"] == "timeout" and row["wall_s"] < 10, row
    assert time.perf_counter() - start < 60


def test_a_model_that_ran_all_in_eager_is_not_a_pass(monkeypatch):
    import cuxla

    def refuse(*args, **kwargs):
        raise RuntimeError("XLA refused the program")

    monkeypatch.setattr(cuxla, "compile", refuse)
    row = _zoo.run("BertForMaskedLM", steps=1)
    assert row["xla_ops"] == 0 and row["max_loss_diff"] <= 1e-6, row  # decomposed ops, in PyTorch
    assert row["verdict"] == "eager only", row


def test_a_gradient_a_fifth_too_large_is_wrong_though_adamw_trains_alike(monkeypatch):
    # AdamW's first steps divide a gradient by its own scale: two independent runs agree to rounding,
    # and only the gradients compared from one state at each step tell.
    compile_ = torch.compile

    class GradientScaled(torch.nn.Module):
        def __init__(self, compiled):
            super().__init__()
            self.compiled = compiled

        def forward(self, **inputs):
            output = self.compiled(**inputs)
            output.loss = output.loss + 0.2 * (output.loss - output.loss.detach())  # its value as eager's
            return output

    def compile_scaling_the_gradient(model, **options):
        return GradientScaled(compile_(model, **options))

    monkeypatch.setattr(torch, "compile", compile_scaling_the_gradient)
    row = _zoo.run("BertForMaskedLM", steps=2)
    assert row["max_loss_diff"] < 1e-6 and row["max_param_diff"] < 1e-4, row  # the runs agree: no longer enough
    assert row["xla_ops"] and not row["runs_part"], row
    assert [0.15 < s["cuxla"]["gradients"] < 0.25 for s in row["steps_from_one_state"]] == [True, True], row
    assert row["verdict"] == "wrong result" and row["detail"].endswith(": steps 1, 2 are not"), row
    monkeypatch.setattr(torch, "compile", compile_)
    right = _zoo.run("BertForMaskedLM", steps=2)
    assert right["verdict"] == "pass" and len(right["steps_from_one_state"]) == 2, right
    assert "from eager's state at each step" in right["detail"], right


def test_the_yardstick_makes_its_own_tensors_in_its_dtype():
    # XGLM fills its mask with its dtype's lowest value through a tensor of the default dtype.
    with pytest.raises(RuntimeError), _zoo._made_in(torch.float64):
        assert torch.ones(1).dtype == torch.float64
        raise RuntimeError("the model failed")
    assert torch.get_default_dtype() == torch.float32  # set back, whatever happened
    row = _zoo.run("XGLMForCausalLM", steps=1)
    assert "yardstick_failed" not in row and row["eager_vs_yardstick"]["losses"] < 1e-6, row
    assert row["verdict"] == "pass" and len(row["steps_from_one_state"]) == 1, row


def test_the_float64_yardstick_runs_mixture_of_experts_models():
    # GptOss's experts default to torch's grouped matrix product, which has no
    # float64 kernel: without a yardstick such a model is judged by the
    # tolerance alone, and float32's own rounding (a token routed to another
    # expert) reads as cuxla's error.
    model, batch = _zoo.build("GptOss", "cpu")
    double = _zoo._yardstick_copy(model, "float64")
    assert {p.dtype for p in double.parameters()} == {torch.float64}
    assert math.isfinite(double(**batch).loss.item())  # raised, with torch's grouped product
    assert model.config._experts_implementation != "eager", "the model itself keeps its own experts' path"


def test_a_bfloat16_run_is_judged_against_float32_and_runs_its_experts_in_xla():
    # What users train in: GPT-OSS's experts in bfloat16 are torch's grouped
    # product (in float32 transformers' own op), which PyTorch ran until cuxla lowered it.
    row = _zoo.run("GptOss", steps=2, dtype="bfloat16")
    assert row["dtype"] == "bfloat16" and row["verdict"] == "pass", row
    assert row["xla_ops"] == row["aten_ops"] > 0 and row["xla_programs"] == row["graphs"], row["fallbacks"]
    assert row["eager_vs_yardstick"]["parameters"] > 1e-4, "eager in bfloat16 is not float32's run"


def test_the_causal_lm_subset_is_transformers_own_classes_past_the_zoo():
    names = _zoo.causal_lms()
    assert "Qwen2ForCausalLM" in names and "MixtralForCausalLM" in names
    assert "LlamaForCausalLM" not in names, "the zoo trains it already, as Llama"
    assert not any(name.startswith("Auto") for name in names)
    assert len(names) > 100  # transformers 5 has about 160


def test_the_image_classifier_subset_is_transformers_own_classes():
    names = _zoo.image_classifiers()
    assert {"ViTForImageClassification", "ResNetForImageClassification", "SwinForImageClassification",
            "ConvNextForImageClassification"} <= set(names)
    assert not any(name.startswith("Auto") for name in names)
    assert len(names) > 30  # transformers 5 has about 40


@pytest.mark.parametrize("name", ["SwinForImageClassification", "CLIPForImageClassification",
                                  "Siglip2ForImageClassification", "ImageGPTForImageClassification"])
def test_an_image_classifier_builds_small_with_a_batch_it_takes(name):
    model, batch = _zoo.build(name, "cpu")
    assert batch["labels"].shape == (_zoo.BATCH,)
    if name.startswith("Swin"):  # a count per stage stays a list: one number would not build
        assert model.config.num_heads == type(model.config)().num_heads and len(model.config.num_heads) == 4
    if name.startswith("CLIP"):  # a composite config's towers are small too
        assert model.config.vision_config.hidden_size == 64 and model.config.vision_config.num_hidden_layers == 2
        assert sum(p.numel() for p in model.parameters()) < 1e6
    loss = model(**batch).loss
    loss.backward()
    assert loss.ndim == 0 and math.isfinite(loss.item())


class _Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return types.SimpleNamespace(loss=self.linear(x).square().mean())


def test_steps_from_one_state_tell_a_wrong_gradient_from_rounding():
    # Each step's loss and gradients, the compiled model and the float64 one given eager's state first.
    torch.manual_seed(0)
    model = _Regressor()
    eager, wider = copy.deepcopy(model), copy.deepcopy(model).double()
    x = torch.randn(8, 4)
    start = copy.deepcopy(model.state_dict())

    def steps(compiled):
        for module in (eager, model, wider):  # each check from the same start
            module.load_state_dict(start)
        return _zoo._steps_from_one_state(eager, model, compiled, wider, {"x": x}, {"x": x.double()}, 3, lambda: None)

    right = steps(torch.compile(model, backend="cuxla"))
    assert len(right) == 3
    assert all(s["cuxla"]["loss"] < 1e-6 and s["cuxla"]["gradients"] < 1e-5 for s in right), right
    assert all(s["yardstick"]["gradients"] < 1e-5 for s in right), right

    def doubled_gradient(**inputs):  # the loss's value as eager's, its gradient twice eager's
        loss = model(**inputs).loss
        return types.SimpleNamespace(loss=loss + (loss - loss.detach()))

    wrong = steps(doubled_gradient)
    assert all(s["cuxla"]["loss"] < 1e-6 and s["cuxla"]["gradients"] > 0.4 for s in wrong), wrong


def test_each_step_is_judged_by_how_far_rounding_carries_the_model_at_any_step():
    # Levit's eager float32 gradients were 0.11 and 0.16 of the largest from float64's at two steps, 0.002
    # at the third: that step's sample of the model's conditioning is not its measure.
    def step(cuxla, own):
        return {"cuxla": {"loss": 0.0, "gradients": cuxla}, "yardstick": {"loss": 0.0, "gradients": own}}

    levit = [step(0.25, 0.11), step(0.06, 0.16), step(0.07, 0.002)]
    assert _zoo._step_by_step(levit, 1e-4, "float32 itself", "float64")[1] == []
    words, failing = _zoo._step_by_step(levit + [step(0.5, 0.1)], 1e-4, "float32 itself", "float64")
    assert failing == [4] and words.endswith(": step 4 is not"), words
    words, failing = _zoo._step_by_step([step(0.2, 1e-6), step(0.2, 2e-6)], 1e-4, "float32 itself", "float64")
    assert failing == [1, 2] and words.endswith(": steps 1, 2 are not"), words


def test_some_steps_apart_fail_only_runs_that_part():
    # Two runs that agree, one step of three apart: a near tie tipped (a token routed to another expert).
    assert _zoo._wrong_after_steps([], [3], 3) == []
    assert _zoo._wrong_after_steps([], [1, 2, 3], 3) == ["step 1"]  # wrong at every step: a wrong gradient
    assert _zoo._wrong_after_steps(["losses"], [3], 3) == ["losses"]  # runs that part: every step must be within
    assert _zoo._wrong_after_steps(["losses"], [], 3) == []  # they part by rounding alone


def test_a_composite_configs_parts_are_small_and_their_rates_zero_in_their_own_types():
    import transformers

    fuyu = _zoo.config_for(transformers.FuyuConfig, {})  # its language model a part of its own
    assert fuyu.text_config.hidden_size == 64 and fuyu.text_config.num_hidden_layers == 2
    mpt = _zoo.config_for(transformers.MptConfig, {}, dropout="zero")  # its attention's rate checked as an int
    assert mpt.attn_config.attn_pdrop == 0
    assert _zoo._zeroed([0.1, 0.2]) == [0.0, 0.0] and _zoo._zeroed(None) is None
    assert _zoo._zeroed(3) == 0 and isinstance(_zoo._zeroed(3), int)
