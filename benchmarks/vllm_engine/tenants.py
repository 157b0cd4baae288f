"""The multi-tenant workload (issue 22): several tenants of different sizes sharing one engine.

A tenant is a customer with its own system prompt, isolated by vLLM's `cache_salt` (blocks of two
salts never share a hash), whose agents run sessions as workload.py builds them; each request also
carries its `session_id` ("TENANT/a<agent>-s<session>"). The flooding tenant sends one-turn
requests of long, never repeated prompts, as fast as the scheduler takes them: it reuses nothing and
pushes the others' prefixes out of the pool.

Spec (--tenants): comma-separated `name:agents:requests`, `:flood` at the end for a flooding tenant,
e.g. the default "acme:6:600,globex:3:300,initech:1:100,flood:3:300:flood".

The engine's own per-tenant truth: the scheduler's per-request `PrefillStats` (vLLM sets it at a
request's first scheduling, `num_cached_tokens` of `num_prompt_tokens`; it comes out on the
request's EngineCoreOutput), summed by the request's tenant.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import workload

DEFAULT_TENANTS = "acme:6:600,globex:3:300,initech:1:100,flood:3:300:flood"
FLOOD = replace(
    workload.WorkloadConfig(),
    system_tokens=16,
    task_tokens=(1200, 2400),
    turns=(1, 1),
    answer_tokens=(16, 32),
    think_steps=(0, 0),
)


@dataclass(frozen=True)
class Tenant:
    name: str
    agents: int
    requests: int
    flood: bool = False


def parse(spec: str) -> list[Tenant]:
    tenants = []
    for part in spec.split(","):
        fields = part.strip().split(":")
        if len(fields) not in (3, 4) or (len(fields) == 4 and fields[3] != "flood"):
            raise SystemExit(f"--tenants: {part!r} is not name:agents:requests[:flood]")
        tenants.append(Tenant(fields[0], int(fields[1]), int(fields[2]), len(fields) == 4))
    if len({t.name for t in tenants}) != len(tenants):
        raise SystemExit("--tenants: a tenant is named twice")
    return tenants


def build(spec: str, seed: int):
    """Per agent: its system prompt, its sessions and its tenant (all tenants' agents, in order)."""
    tok = workload.load_tokenizer()
    systems, sessions, tenant_of = [], [], []
    for i, t in enumerate(parse(spec)):
        base = FLOOD if t.flood else workload.WorkloadConfig()
        cfg = replace(base, requests=t.requests, agents=t.agents, seed=seed + 1000 * (i + 1))
        system, agents = workload.build(cfg, tok)
        for a in agents:
            systems.append(system)
            sessions.append(a)
            tenant_of.append(t.name)
    return systems, sessions, tenant_of


def summary(systems, sessions, tenant_of) -> dict:
    out: dict[str, dict] = {}
    for system, agent, tenant in zip(systems, sessions, tenant_of, strict=True):
        row = out.setdefault(tenant, {"agents": 0, "requests": 0, "prompt_tokens": 0})
        row["agents"] += 1
        for s in agent:
            ctx = len(system)
            for turn in s.turns:
                ctx += len(turn.new_tokens)
                row["requests"] += 1
                row["prompt_tokens"] += ctx
                ctx += len(turn.answer)
    return out


class TenantTruth:
    """The scheduler's own per-request prefill stats, summed by tenant."""

    def __init__(self) -> None:
        self.by_tenant: dict[str, dict[str, int]] = {}

    def add(self, tenant: str, stats) -> None:
        row = self.by_tenant.setdefault(tenant, {"requests": 0, "prompt_tokens": 0, "cached_tokens": 0})
        row["requests"] += 1
        row["prompt_tokens"] += stats.num_prompt_tokens
        row["cached_tokens"] += stats.num_cached_tokens

    def result(self) -> dict:
        return {
            name: {
                **row,
                "hit_rate": row["cached_tokens"] / row["prompt_tokens"] if row["prompt_tokens"] else None,
            }
            for name, row in sorted(self.by_tenant.items())
        }
