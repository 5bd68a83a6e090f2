"""Generation throughput (core.generation): items/s and tokens/s on this machine.

- A tiny random Llama (2 layers, hidden 32, as the tests build it; no real language model can be fetched here),
  run to its token limit so every arm makes the same number of tokens: directional control (λ 1.5: two forward
  passes per token, the guided and the negative context) against step by step (λ 0), and our step-by-step path
  against plain `model.generate` on the same prompts (what our engine adds).
- An OpenAI-compatible endpoint: a loopback server that answers after a fixed delay (a stand-in for a real
  server's latency), concurrency 4 against 1, so the ratio is what `--concurrency` buys when the server is the
  bottleneck.
Arms alternate (A B, B A, ...); medians over repeats; the item cache is bypassed (a fresh one per call). The tiny
model's answers never end on their own, so each is max_tokens long and the arms make the same tokens.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.common import Options, header, interleaved, line, load_note, ratio, runs_note

SERVER_DELAY_S = 0.05


def _sources(n: int) -> list[str]:
    words = ["cooking", "finance", "sport", "music", "travel", "science", "film", "garden"]
    return [f"a short story about {words[i % len(words)]} number {i} on a quiet day" for i in range(n)]


def run(opts: Options) -> None:
    import torch

    from core.generation.engines import EndpointEngine, LocalEngine
    from core.generation.items import ItemCache
    from core.generation.lists import ListSettings, messages
    from core.generation.run import generate
    from tests.openai_server import Answer, LoopbackServer
    from tests.tiny_model import build_tiny_causal_lm

    n, max_tokens = (6, 24) if opts.quick else (24, 64)
    repeats = 3 if opts.quick else 5
    header("generate", f"{n} sentences of {max_tokens} tokens from a tiny Llama on {opts.device}; {4 * n} two-step "
           f"lists from a loopback endpoint answering in {SERVER_DELAY_S * 1000:.0f} ms; {load_note()}")
    with tempfile.TemporaryDirectory(prefix="bench-generate-") as tmp:
        engine = LocalEngine(build_tiny_causal_lm(Path(tmp) / "lm"), opts.device)
        sources = _sources(n)
        pairs = list(zip(sources[1:] + sources[:1], sources))  # (guided context, the context two steps back)
        made: dict[str, int] = {}

        def guided(scale: float):
            def arm() -> None:
                made[f"scale {scale}"] = sum(engine.directional(messages(s), messages(back), scale, max_tokens).tokens
                                             for s, back in pairs)
            return arm

        def plain() -> None:
            tokens = 0
            for s, _back in pairs:
                ids = engine.prompt_ids(messages(s))
                with torch.inference_mode():
                    out = engine.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                                max_new_tokens=max_tokens, pad_token_id=0)
                tokens += out.shape[1] - ids.shape[1]
            made["plain"] = tokens

        arms = {"directional (λ 1.5)": guided(2.5), "stepwise (λ 0)": guided(1.0), "plain generate": plain}
        keys = {"directional (λ 1.5)": "scale 2.5", "stepwise (λ 0)": "scale 1.0", "plain generate": "plain"}
        medians, times = interleaved(arms, repeats, warmup={"w": guided(2.5)})
        for name in arms:
            tokens = made[keys[name]]
            line(name, f"{tokens / medians[name]:.0f} tokens/s, {n / medians[name]:.1f} sentences/s "
                 f"({tokens:,} tokens, median {medians[name]:.3f} s)")
        per_token = {name: medians[name] / max(made[keys[name]], 1) for name in arms}
        line("directional / stepwise, s a token", ratio(per_token["directional (λ 1.5)"], per_token["stepwise (λ 0)"]))
        line("stepwise / plain generate, s a token", ratio(per_token["stepwise (λ 0)"], per_token["plain generate"]))
        line("runs (s)", runs_note(times, fmt="{:.3f}"))

        def answer(body: dict, _call: int) -> Answer:
            """A server that moves the sentence one step (a new number each time), after its latency."""
            time.sleep(SERVER_DELAY_S)
            sentence = body["messages"][-1]["content"].removeprefix("Sentence: ")
            return Answer(content=f"{sentence.rsplit(' ', 1)[0]} {_call}")

        source = Path(tmp) / "queries.csv"
        source.write_text("text\n" + "\n".join(_sources(4 * n)) + "\n")
        with LoopbackServer(answer) as server:
            endpoint = EndpointEngine(server.url, "loopback")
            settings = ListSettings(method="stepwise", steps=2)  # two requests a list

            def with_concurrency(k: int):
                def arm() -> None:
                    cache = ItemCache(Path(tempfile.mkdtemp(dir=tmp)) / "items.jsonl")  # nothing reused
                    generate("lists", endpoint, source, Path(tmp) / f"out{k}.csv", settings, concurrency=k,
                             cache=cache)
                return arm

            conc = {"concurrency 4": with_concurrency(4), "concurrency 1": with_concurrency(1)}
            medians_c, times_c = interleaved(conc, repeats)
        for name in conc:
            line(name, f"{8 * n / medians_c[name]:.1f} requests/s (median {medians_c[name]:.2f} s)")
        line("concurrency 1 / 4, time", ratio(medians_c["concurrency 1"], medians_c["concurrency 4"]))
        line("runs (s)", runs_note(times_c, fmt="{:.2f}"))
