"""hydra._read_plain reads the plain override shapes (numbers, words, paths, quoted strings, lists, dicts) without
hydra-core's ANTLR parser: what it reads must be what that parser reads, value, type and text. A seeded corpus of
generated tokens is read both ways; tokens outside the plain shapes must be left to Hydra (None)."""

from __future__ import annotations

import math
import random

import pytest

from offlint.sources import hydra

# characters the lexer treats differently: the primitive's own, structure, quotes, escapes, blanks, `$`, non-ASCII
_ALPHABET = list("abeEinfINFtrulsTRULS_0123456789-./+%*@?|") + list("$:=,[]{}()\"'\\ \t~#!&é")
_PLAIN_ALPHABET = _ALPHABET[:41]
# single tokens of each lexer rule, and near misses: FLOAT/INT/BOOL/NULL against ID and UNQUOTED_CHAR
_ATOMS = ["true", "False", "NULL", "tRuE", "nulls", "truex", "inf", "-inf", "+nan", "NaN", "inf_x", "infinity",
          "1e5", "1E-4", "1e+3", "2.5e+3", "1e", "e5", "1e5abc", "1e1_0", "0.00001", "0.000005", ".5", "1.", "1.0.0",
          "1.5_0", "1_0.5", "1_000", "1_", "_1", "0_1", "1__0", "007", "0x10", "-1", "+5", "-0", "1+2", "9" * 30,
          "Qwen/Qwen3.6-35B-A3B", "/workspace/results/x", "work/data/rp2", "a-b", "Et*11|t*11|t*10mL", "-", "+",
          ".", "%", "@", "?", "|", "_", "995ad96eacd98c81ed38be0c5b274b04031597b0", "megatron-bridge-cord_v2"]
_ODD_ATOMS = ["a:b", "${x}", "$x", "a\\,b", "a b", " a", "a ", "\\\\", "a=b", "(x)", "é"]


def _primitive(r: random.Random, plain: bool) -> str:
    if r.random() < 0.4:
        return r.choice(_ATOMS + ([] if plain else _ODD_ATOMS))
    return "".join(r.choice(_PLAIN_ALPHABET if plain else _ALPHABET) for _ in range(r.randint(1, 7)))


def _quoted(r: random.Random, plain: bool) -> str:
    q = r.choice("\"'")
    body = "".join(chr(r.randint(32, 126)) if plain else r.choice(_ALPHABET + [" "] * 4)
                   for _ in range(r.randint(0, 8)))
    if plain:
        body = body.replace('"', "").replace("'", "").replace("\\", "").replace("$", "")
    return q + body + (q if plain or r.random() < 0.95 else "")


def _element(r: random.Random, plain: bool, depth: int = 0) -> str:
    k, closed = r.random(), plain or r.random() < 0.97
    if depth < 4 and k < 0.2:
        return "[" + ",".join(_element(r, plain, depth + 1) for _ in range(r.randint(0, 3))) + ("]" if closed else "")
    if depth < 4 and k < 0.35:
        pairs = [_primitive(r, plain) + (":" if plain or r.random() < 0.97 else "") + _element(r, plain, depth + 1)
                 for _ in range(r.randint(0, 3))]
        return "{" + ",".join(pairs) + ("}" if closed else "")
    return _quoted(r, plain) if k < 0.5 else _primitive(r, plain)


def _token(r: random.Random, plain: bool) -> str:
    segments = ["model", "a", "x_1", "_b", "Tr", "true", "inf", "null", "A9", "env_vars"] + (
        [] if plain else ["1a", "a-b", "é", "$x"])
    key = ".".join(r.choice(segments) for _ in range(r.randint(1, 3)))
    if plain:
        return r.choice(["", "+", "++"]) + key + "=" + _element(r, plain)
    key = r.choice(["", "", "", "+", "++", "~", "+++"]) + key + ("@pkg" if r.random() < 0.05 else "")
    value = _element(r, plain) if r.random() < 0.9 else ",".join(_element(r, plain) for _ in range(2))
    return key + r.choice(["=", "=", "=", "=", "= ", ""]) + value


def _shown(overrides) -> list:
    return [(o.key, repr(o.value), type(o.value), o.op, o.text) for o in overrides]  # repr: nan == nan


def _hydra_reads(token: str):
    try:
        return _shown(hydra._parse_with_hydra.__wrapped__(token))
    except hydra.OverrideError as exc:
        return str(exc)


@pytest.mark.parametrize("plain", [True, False])
def test_plain_overrides_read_as_hydra_reads_them(plain):
    r = random.Random(19 if plain else 20)
    tokens = [_token(r, plain) for _ in range(1500)]
    read = 0
    for token in tokens:
        got = hydra._read_plain(token)
        if got is None:
            continue
        read += 1
        assert _shown(got) == _hydra_reads(token), token
    assert read > (1200 if plain else 80)  # the corpus does reach the plain reader


@pytest.mark.parametrize("token", [
    "optimizer.lr=1e-4", "optimizer.min_lr=0.00001", "optimizer.lr=0.000005", "model.hf_model_id=Qwen/Qwen3.6-35B-A3B",
    "checkpoint.save=/workspace/results/x", "model.recompute_modules=[core_attn,mlp]", "model.x=[a,[1,2.5],{}]",
    "dataset.offline_packing_specs={packed_sequence_size:2048,pad_seq_to_mult:1}", "dataset.split=\"9999,8,2\"",
    "++tokenizer.kwargs.revision=\"2d59de1c\"", 'dataset.blend=[["work/data/head_01"],null]', "model.a=007",
    "dataset.kwargs={revision:995ad96e}", "model.layout=Et*11|t*11|t*10mL", "model.a=inf", "model.a=-inf_x",
    "model.a=TRUE", "model.a=nULL", "x=1", "mixed_precision=bf16_mixed", "model={1:a,1.0:b,true:c}", "model.a='x y'",
])
def test_tokens_of_launch_scripts_read_plain_as_hydra_reads_them(token):
    got = hydra._read_plain(token)
    assert got is not None, token
    assert _shown(got) == _hydra_reads(token)
    if token == "model.a=inf":
        assert math.isinf(got[0].value)


@pytest.mark.parametrize("token", [
    "model.a=", "model.a=1,2", "model.a= 1", "model.a=a b", "model.a=${x}", "model.a=\"${x}\"", "model.a=a\\,b",
    "model.a=x:y", "~model.a", "~model.a=1", "model.a=[a, b]", "model.a=[a,]", "model.a={a:1,}", "model.a={a}",
    "model.a=choice(1,2)", "model@pkg.a=1", "model.a-b=1", "modél.a=1", "model.a=é", "model.a=\"a\"b",
    "model.a='it\\'s'", "+++model.a=1", "model.a=[" * 30 + "]" * 30, "model.a=" + "9" * 5000,
])
def test_other_shapes_are_left_to_hydra(token):
    assert hydra._read_plain(token) is None
