"""`kvset model`: text and JSON output, presets list, overrides and errors (exit code 2, no traceback)."""

import json
import subprocess
import sys

import pytest

from kvset.cli import main
from tests.support.paths import ROOT


def run_json(capsys, *argv):
    assert main(["model", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_dense_model_json(capsys):
    report = run_json(capsys, "llama-3.1-70b")
    assert report["full_attention_bytes_per_token"] == 327_680  # 80 x 2 x 8 x 128 x 2 B
    assert report["full_attention_bytes_per_block"] == 5_242_880  # x 16 tokens
    assert report["hybrid_reserve_bytes"] == 0
    assert report["hybrid_reserve"]["summary"] == "no hybrid layers: reserve 0"
    assert report["kv_dtype"] == "bf16" and report["block_size"] == 16
    assert report["geometry"]["num_layers"] == 80


def test_dense_model_text(capsys):
    assert main(["model", "llama-3.1-70b"]) == 0
    text = capsys.readouterr().out
    assert "320.0 KiB (327,680 B)" in text
    assert "80 layers x 2 (K, V) x 8 KV heads x 128 head dim x 2 B = 327,680 B" in text
    assert "5.0 MiB (5,242,880 B)" in text
    assert "no hybrid layers: reserve 0" in text


def test_kv_dtype_and_block_size_flags(capsys):
    report = run_json(capsys, "llama-3.1-70b", "--kv-dtype", "fp8", "--block-size", "32")
    assert report["kv_dtype"] == "fp8_e4m3"
    assert report["full_attention_bytes_per_token"] == 163_840  # 80 x 2 x 8 x 128 x 1 B
    assert report["full_attention_bytes_per_block"] == 5_242_880  # x 32 tokens


def test_gemma_reserve_json_and_text(capsys):
    report = run_json(capsys, "gemma-3-27b", "--concurrency", "8", "--context", "32768")
    # 52 sliding layers x 2 x 16 x 128 x 2 B x 1024 tokens = 436,207,616 per request; x 8
    assert report["hybrid_reserve_bytes"] == 3_489_660_928
    sw = report["hybrid_reserve"]["sliding_window"]
    assert sw["bytes_per_request"] == 436_207_616 and sw["tokens_per_request"] == 1024
    assert report["full_attention_bytes_per_token"] == 81_920
    assert report["context_source"] == "given"

    assert main(["model", "gemma-3-27b", "--concurrency", "8", "--context", "32768"]) == 0
    text = capsys.readouterr().out
    assert "52 layers x 2 x 16 KV heads x 128 x 2 B x 1,024 tokens = 416.0 MiB per request" in text
    assert "3,489,660,928 B" in text
    assert "sliding_window_pattern" in text  # the applied class default is shown


def test_context_defaults_to_max_position_embeddings(capsys):
    report = run_json(capsys, "qwen3-next-80b-a3b", "--concurrency", "4")
    assert report["context_tokens"] == 262_144
    assert report["context_source"] == "max_position_embeddings"
    # 36 Gated DeltaNet layers x 1,097,728 B x 4 requests = 158,072,832
    assert report["hybrid_reserve_bytes"] == 158_072_832
    assert report["hybrid_reserve"]["linear_attention"]["bytes_per_layer"] == 1_097_728


def test_mamba_hybrid_text(capsys):
    assert main(["model", "nemotron-h-8b-base-8k", "--concurrency", "16"]) == 0
    text = capsys.readouterr().out
    assert "24 Mamba" in text and "Mamba2 per layer" in text
    assert "828,899,328 B" in text  # 24 x 2,158,592 B x 16


def test_overrides_from_flags_on_a_config_file(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "hidden_size": 4096,
            }
        )
    )
    report = run_json(capsys, str(path), "--kv-heads", "4", "--layers", "16")
    # 16 x 2 x 4 x 128 x 2 B = 32,768
    assert report["full_attention_bytes_per_token"] == 32_768
    assert any(n.startswith("overridden:") for n in report["notes"])
    report = run_json(capsys, "gpt-oss-20b", "--sliding-window", "256", "--context", "1000")
    assert report["hybrid_reserve_bytes"] == 6_291_456  # 12 x 2 x 8 x 64 x 2 B x 256
    report = run_json(capsys, "qwen3-next-80b-a3b", "--state-dtype", "fp32", "--concurrency", "1")
    assert report["hybrid_reserve_bytes"] == 79_036_416  # (24,576 + 524,288) x 4 B x 36


def test_list(capsys):
    assert main(["model", "--list"]) == 0
    text = capsys.readouterr().out
    for name in ("llama-3.1-8b", "qwen3-235b-a22b", "deepseek-v3", "nemotron-h-8b-base-8k", "gpt-oss-120b"):
        assert name in text
    assert "327,680" in text and "meta-llama/Llama-3.1-70B-Instruct" in text
    assert main(["model", "--list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["presets"]}
    assert rows["deepseek-v3"]["full_attention_bytes_per_token"] == 70_272  # 61 x 576 x 2 B
    assert rows["gemma-3-27b"]["hybrid_bytes_per_request_full_window"] == 436_207_616


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["llama-3.1-7b"], "did you mean"),
        ([], "give a MODEL"),
        (["/nonexistent/dir/config.json"], "no such file"),
        (["gemma-3-27b", "--layers", "30"], "num_layers alone is ambiguous"),
        (["deepseek-v3", "--kv-heads", "8"], "MLA"),
    ],
)
def test_errors_exit_2_with_a_message(argv, message, capsys):
    assert main(["model", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""
    assert "Traceback" not in captured.err


def test_malformed_config_files_exit_2(tmp_path, capsys):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    assert main(["model", str(bad)]) == 2
    assert "malformed JSON at line 1" in capsys.readouterr().err
    bad.write_text(json.dumps({"num_hidden_layers": 4, "num_key_value_heads": "eight", "head_dim": 64}))
    assert main(["model", str(bad), "--json"]) == 2
    assert "'num_key_value_heads' must be an integer" in capsys.readouterr().err
    bad.write_text(json.dumps({"num_key_value_heads": 8, "head_dim": 64}))
    assert main(["model", str(bad)]) == 2
    assert "missing field 'num_hidden_layers'" in capsys.readouterr().err


def test_bad_flag_values_are_usage_errors(capsys):
    for argv in (
        ["llama-3.1-8b", "--kv-dtype", "int3"],
        ["llama-3.1-8b", "--block-size", "0"],
        ["llama-3.1-8b", "--kv-heads", "x"],
    ):
        with pytest.raises(SystemExit) as info:
            main(["model", *argv])
        assert info.value.code == 2
    assert "unknown dtype 'int3'" in capsys.readouterr().err


def test_python_dash_m_kvset_model_runs_without_traceback(tmp_path):
    ok = subprocess.run(
        [sys.executable, "-m", "kvset", "model", "deepseek-v3", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["full_attention_bytes_per_token"] == 70_272
    bad = tmp_path / "config.json"
    bad.write_bytes(b"\xff\xfe garbage")
    failed = subprocess.run(
        [sys.executable, "-m", "kvset", "model", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 2
    assert "not UTF-8" in failed.stderr and "Traceback" not in failed.stderr
