# Writes the trainer-format fixtures of tests/fixtures/formats/ (tests/io/formats.test.ts): small batches
# built from each trainer's documented keys, shapes, padding and alignment, each with a planted bug the
# Doctor must flag. Deterministic (no RNG), so re-running reproduces the committed bytes; the test does.
#   python3 scripts/make_format_fixtures.py [OUT_DIR]     (default tests/fixtures/formats)
# Needs torch; writes safetensors with the test shim in tests/python/shim (same layout as safetensors).
import json
import math
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python", "shim"))
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

PAD, EOS, TOOL_OPEN = 0, 2, 7
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "tests", "fixtures", "formats")


def logp(b, t):
    """A made-up but deterministic log-prob for token t of sample b."""
    return -0.1 - 0.05 * ((b * 7 + t * 3) % 11)


def left_pad(rows, width, value):
    return [[value] * (width - len(r)) + r for r in rows]


def right_pad(rows, width, value):
    return [r + [value] * (width - len(r)) for r in rows]


def trl_advantages(rewards, G):
    """TRL: (r − group mean) / (Bessel std + 1e-4), groups of G consecutive global rows, float32."""
    r = torch.tensor(rewards, dtype=torch.float32).view(-1, G)
    return ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).view(-1)


def trl_two_ranks():
    """TRL dict of a 2-process run: G = 4, 6 rows per rank, so group 1 straddles the ranks (process_slice).
    Planted: group 2 (global rows 8..11, all on rank 1) got identical rewards → zero-std-group."""
    G, B, P, C = 4, 6, 5, 6
    prompts = [[11, 12, 13], [11, 12, 13], [11, 12, 13], [11, 12, 13], [21, 22, 23, 24, 25], [21, 22, 23, 24, 25],
               [21, 22, 23, 24, 25], [21, 22, 23, 24, 25], [31, 32], [31, 32], [31, 32], [31, 32]]
    completions = [[40, 41, EOS], [42, EOS], [43, 44, 45, 46, 47, 48], [49, EOS],  # row 2: truncated (no EOS)
                   [50, EOS, 90, 91, 52, EOS], [53, EOS], [54, 55, EOS], [56, EOS],  # row 4: tool call; the tool output 90 91 follows its EOS
                   [60, EOS], [61, 62, EOS], [63, EOS], [64, 65, 66, EOS]]
    tool = [[1] * len(c) for c in completions]
    tool[4][2:4] = [0, 0]
    rewards = [1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 1.0, 0.0, 0.5, 0.5, 0.5, 0.5]
    adv = trl_advantages(rewards, G)
    config = {"num_generations": G, "beta": 0.04, "epsilon": 0.2, "loss_type": "dapo", "scale_rewards": "group",
              "temperature": 1.0, "max_completion_length": C, "max_prompt_length": P, "gradient_accumulation_steps": 2,
              # As GRPOConfig.__post_init__ leaves them with one micro-batch per generation batch (left unset, it
              # would take steps_per_generation = gradient_accumulation_steps and split the batch in two).
              "steps_per_generation": 1, "generation_batch_size": B * 2,
              "per_device_train_batch_size": B, "learning_rate": 1e-6, "output_dir": "out"}
    for rank in range(2):
        rows = range(rank * B, (rank + 1) * B)  # process_slice
        cs = [completions[i] for i in rows]
        old = [[logp(i, t) for t in range(len(completions[i]))] for i in rows]
        out = {
            "prompt_ids": torch.tensor(left_pad([prompts[i] for i in rows], P, PAD)),
            "prompt_mask": torch.tensor(left_pad([[1] * len(prompts[i]) for i in rows], P, 0)),
            "completion_ids": torch.tensor(right_pad(cs, C, PAD)),
            "completion_mask": torch.tensor(right_pad([[1] * len(c) for c in cs], C, 0)),
            "advantages": adv[rank * B:(rank + 1) * B].contiguous(),
            "old_per_token_logps": torch.tensor(right_pad(old, C, 0.0)),
            # vLLM log-probs: close to the trainer's; TRL writes 0 on tool-output tokens and pads with 0
            "sampling_per_token_logps": torch.tensor(right_pad([[(x + 0.001) * tool[i][t] for t, x in enumerate(r)] for i, r in zip(rows, old)], C, 0.0)),
            "ref_per_token_logps": torch.tensor(right_pad([[x - 0.01 for x in r] for r in old], C, 0.0)),
            # TRL pads tool_mask with 1
            "tool_mask": torch.tensor(right_pad([tool[i] for i in rows], C, 1)),
            "num_items_in_batch": torch.tensor(sum(sum(t for t in tool[i]) for i in range(2 * B))),
        }
        meta = {"config": json.dumps(config), "rank": str(rank), "num_processes": "2", "pad_token_id": str(PAD),
                "eos_token_id": str(EOS), "rewards": json.dumps(rewards)}
        save_file(out, os.path.join(OUT, f"trl-rank{rank}.safetensors"), metadata=meta)


def verl_interleaved():
    """verl DataProto after compute_advantage with algorithm.norm_adv_by_std_in_grpo = false, rollout.n = 3,
    rows reordered by _balance_batch so each uid's rows are spread out. Row 4 is a multi-turn rollout
    (response_mask 0 on tool tokens). Planted: uid "c…" got identical rewards → zero-std-group, visible
    only when groups come from uid (its rows are 1, 5, 8)."""
    P, R = 4, 5
    uid_of = ["a3f1", "c9e2", "b7d4", "a3f1", "b7d4", "c9e2", "a3f1", "b7d4", "c9e2"]
    prompt_of = {"a3f1": [11, 12, 13], "b7d4": [21, 22], "c9e2": [31, 32, 33, 34]}
    responses = [[40, EOS], [41, 42, EOS], [43, EOS], [44, 45, 46, 47, 48], [49, TOOL_OPEN, 90, 50, EOS],
                 [51, EOS], [52, 53, EOS], [54, EOS], [55, 56, 57, EOS]]
    scores = [1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.5, 1.0, 0.0]
    mask = [[1] * len(r) for r in responses]
    mask[4][2] = 0  # tool output token
    means = {u: sum(s for s, v in zip(scores, uid_of) if v == u) / 3 for u in prompt_of}
    prompts = left_pad([prompt_of[u] for u in uid_of], P, PAD)
    prompt_mask = left_pad([[1] * len(prompt_of[u]) for u in uid_of], P, 0)
    resp = right_pad(responses, R, PAD)
    resp_mask = right_pad(mask, R, 0)
    attn = [pm + right_pad([[1] * len(r)], R, 0)[0] for pm, r in zip(prompt_mask, responses)]
    level = [[0.0] * R for _ in responses]
    for b, r in enumerate(responses):
        level[b][len(r) - 1] = scores[b]
    adv = [[(scores[b] - means[uid_of[b]]) * m for m in resp_mask[b]] for b in range(len(responses))]
    old = [[logp(b, t) * m for t, m in enumerate(resp_mask[b])] for b in range(len(responses))]
    out = {
        "prompts": torch.tensor(prompts), "responses": torch.tensor(resp),
        "input_ids": torch.tensor([p + r for p, r in zip(prompts, resp)]),
        "attention_mask": torch.tensor(attn), "response_mask": torch.tensor(resp_mask),
        "position_ids": torch.tensor([[max(0, sum(a[:t + 1]) - 1) for t in range(P + R)] for a in attn]),
        "old_log_probs": torch.tensor(old), "ref_log_prob": torch.tensor([[x - 0.02 for x in r] for r in old]),
        "token_level_scores": torch.tensor(level), "token_level_rewards": torch.tensor(level),
        "advantages": torch.tensor(adv), "returns": torch.tensor(adv),
    }
    meta = {"uid": json.dumps(uid_of), "pad_token_id": str(PAD), "eos_token_id": str(EOS),
            "config": json.dumps({"rollout_n": 3, "norm_adv_by_std_in_grpo": False, "adv_estimator": "grpo",
                                  "loss_agg_mode": "token-mean"})}
    save_file(out, os.path.join(OUT, "verl-interleaved.safetensors"), metadata=meta)


def openrlhf(off_by_one):
    """OpenRLHF Experience: n_samples_per_prompt = 2, rows in index order [2, 0, 3, 1] (groups 1, 0, 1, 0),
    sequences = left-padded prompt + right-padded response, action_mask over sequences[:, 1:].
    Planted (off_by_one): the exporter built action_mask over sequences[:, :-1], so read correctly every
    mask is one token late: the first response token falls in the prompt and the mask covers the pad
    after the EOS → mask-covers-padding."""
    P, R = 4, 4
    index = [2, 0, 3, 1]
    prompts = {0: [11, 12, 13], 1: [21, 22]}
    responses = [[40, 41, EOS], [42, EOS], [43, EOS], [44, 45, 46, EOS]]
    rewards = [1.0, 0.0, 0.0, 1.0]
    seqs, attn, action = [], [], []
    for b, i in enumerate(index):
        p = prompts[i // 2]
        s = [PAD] * (P - len(p)) + p + responses[b] + [PAD] * (R - len(responses[b]))
        a = [0] * (P - len(p)) + [1] * (len(p) + len(responses[b])) + [0] * (R - len(responses[b]))
        is_action = [1 if P <= t < P + len(responses[b]) else 0 for t in range(P + R)]
        seqs.append(s)
        attn.append(a)
        action.append(is_action[:-1] if off_by_one else is_action[1:])
    by_group = {}
    for b, i in enumerate(index):
        by_group.setdefault(i // 2, []).append(rewards[b])
    stats = {g: (sum(v) / 2, torch.tensor(v).std().item()) for g, v in by_group.items()}
    # group_norm: (r − mean) / (std + 1e-9), broadcast over the action tokens (γ = 1, reward at the end)
    adv = [[(rewards[b] - stats[i // 2][0]) / (stats[i // 2][1] + 1e-9) * m for m in action[b]] for b, i in enumerate(index)]
    lp = [[logp(b, t) * m for t, m in enumerate(action[b])] for b in range(len(index))]
    out = {
        "sequences": torch.tensor(seqs), "attention_mask": torch.tensor(attn), "action_mask": torch.tensor(action, dtype=torch.bool),
        "action_log_probs": torch.tensor(lp), "base_action_log_probs": torch.tensor([[x * 1.01 for x in r] for r in lp]),
        "advantages": torch.tensor(adv), "returns": torch.tensor(adv), "rewards": torch.tensor(rewards),
    }
    meta = {"index": json.dumps(index), "n_samples_per_prompt": "2", "pad_token_id": str(PAD), "eos_token_id": str(EOS)}
    name = "openrlhf-action-mask-off-by-one" if off_by_one else "openrlhf-experience"
    save_file(out, os.path.join(OUT, f"{name}.safetensors"), metadata=meta)


def prime_rl():
    """prime-rl token export (schema_version 1): one record per sequence, every column aligned with
    token_ids, non-finite floats as null, trainer log-probs shifted right (position 0 = log(1/V)).
    Record 1 is multi-turn (loss_mask 0 on tool tokens). Planted: record 2's loss_mask is 2 entries
    shorter than its token_ids → mask-length-mismatch."""
    V = 128
    seqs = [([11, 12, 13], [40, 41, EOS], None), ([21, 22], [42, TOOL_OPEN, 90, 91, 43, EOS], (2, 4)),
            ([31, 32, 33], [44, 45, 46, 47, EOS], None), ([11, 12], [48, EOS], None)]
    advs = [0.5, -0.5, 1.0, -1.0]
    lines = []
    for b, (p, c, tool) in enumerate(seqs):
        ids = p + c
        n = len(ids)
        loss = [False] * len(p) + [True] * len(c)
        if tool:
            for t in range(len(p) + tool[0], len(p) + tool[1]):
                loss[t] = False
        if b == 2:
            loss = loss[:-2]
        trainer = [math.log(1.0 / V)] + [logp(b, t) for t in range(1, n)]
        inference = [0.0] * len(p) + [logp(b, t) + 0.002 for t in range(len(p), n)]
        rec = {
            "schema_version": 1, "step": 3, "rank": 0, "micro_step": 0, "micro_sequence_idx": b, "export_sequence_idx": b,
            "env_name": "gsm8k", "token_ids": ids, "position_ids": list(range(n)), "loss_mask": loss,
            "advantages": [advs[b] if t >= len(p) else 0.0 for t in range(n)],
            "inference_logprobs": inference, "trainer_logprobs": trainer,
            "entropy": [math.log(V)] + [0.5] * (n - 1), "mismatch_kl": [0.0] * n,
            "log_importance_ratio": [a - i for a, i in zip(trainer, inference)],
            "importance_ratio": [math.exp(a - i) for a, i in zip(trainer, inference)],
            "prob_delta": [math.exp(a) - math.exp(i) for a, i in zip(trainer, inference)],
            "is_masked": [False] * n, "is_masked_high": [False] * n, "is_masked_low": [False] * n,
            "rl_weights": [None] * n, "ce_weights": [None] * n, "ref_kl_weights": [None] * n,
        }
        lines.append(json.dumps(rec, separators=(",", ":"), allow_nan=False))
    with open(os.path.join(OUT, "prime-rl-short-loss-mask.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")


def f32(x):
    """x rounded to float32, as the trainer's tensor holds it (.tolist() gives the float32 value as a double)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def nemo_rl(planted):
    """NeMo-RL train_data_step{N}.jsonl (nemo_rl/algorithms/grpo.py log_data → nemo_rl/utils/logger.py
    log_batched_dict_as_jsonl): one line per sample, every key a one-element list of that row, plus "idx".
    token_ids right-padded with the pad id past input_lengths to a multiple of 4; token_loss_mask 1 on generated
    assistant tokens only (row 1 is multi-turn: 0 on the tool turn); generation_logprobs 0 off generated tokens;
    prev_logprobs aligned with token_ids (0 at position 0); advantages NeMo-RL's default GRPO estimator (leave-one-out
    baseline, Bessel std + 1e-6) over groups of one prompt, expanded over every column, float32.
    Planted (nemo-rl-mask-on-pad.jsonl): row 0's token_loss_mask is 1 on its first pad → mask-covers-padding."""
    prompts = [[11, 12, 13], [21, 22]]
    comps = [[40, 41, EOS], [42, TOOL_OPEN, 90, 91, 43, EOS], [44, 45, 46, EOS], [47, EOS], [48, 49, 50, EOS], [51, 52, EOS]]
    tools = {1: (2, 4)}
    rewards = [1.0, 0.0, 0.5, 1.0, 1.0, 0.0]
    G = 3
    adv = []
    for g in range(len(prompts)):
        r = rewards[g * G:(g + 1) * G]
        for i in range(G):
            others = [x for j, x in enumerate(r) if j != i]
            base = sum(others) / (G - 1)
            var = (sum(x * x for x in others) / (G - 1) - base * base) * ((G - 1) / (G - 2))
            std = math.sqrt(max(var, 0.0))
            a = r[i] - base
            adv.append(f32(a / (std + 1e-6) if std > 0 else a))
    rows = [prompts[b // G] + comps[b] for b in range(len(comps))]
    S = -(-max(len(r) for r in rows) // 4) * 4
    lines = []
    for b, ids in enumerate(rows):
        n, p = len(ids), len(prompts[b // G])
        mask = [0] * p + [1] * (n - p)
        if b in tools:
            for t in range(p + tools[b][0], p + tools[b][1]):
                mask[t] = 0
        gen = [f32(logp(b, t) + 0.002) if mask[t] else 0.0 for t in range(n)]
        prev = [0.0] + [f32(logp(b, t)) for t in range(1, S)]
        mask += [0] * (S - n)
        if planted and b == 0:
            mask[n] = 1
        rec = {
            "content": [["<|im_start|>user\nQ%d<|im_end|>\n" % (b // G), "A%d<|im_end|>" % b]],
            "rewards": [rewards[b]], "input_lengths": [n], "token_ids": [ids + [PAD] * (S - n)],
            "token_loss_mask": [mask], "sample_loss_mask": [1.0], "advantages": [[adv[b]] * S],
            "generation_logprobs": [gen + [0.0] * (S - n)], "prev_logprobs": [prev], "idx": b,
        }
        lines.append(json.dumps(rec))
    name = "nemo-rl-mask-on-pad.jsonl" if planted else "nemo-rl-train_data_step3.jsonl"
    with open(os.path.join(OUT, name), "w") as f:
        f.write("\n".join(lines) + "\n")


def slime(planted):
    """slime's rollout dump (slime/observability/rollout_data_utils.py save_debug_rollout_data:
    torch.save({"rollout_id", "samples": [Sample.to_dict()]})) as JSON, the form docs/import/slime.md's one line
    writes. tokens = prompt + response, unpadded; loss_mask and rollout_log_probs over the response; group_index per
    prompt; reward a float. Sample 1 is multi-turn (loss_mask 0 on tool tokens).
    Planted (slime-short-loss-mask.json): sample 1's loss_mask is 2 entries shorter than response_length (a custom
    generate that did not extend it over the last turn) → mask-length-mismatch."""
    prompts = [[11, 12, 13], [21, 22]]
    comps = [[40, 41, EOS], [42, TOOL_OPEN, 90, 91, 43, EOS], [44, 45, 46, EOS], [47, EOS], [48, 49, 50, EOS], [51, 52, EOS]]
    tools = {1: (2, 4)}
    rewards = [1.0, 0.0, 0.5, 1.0, 0.0, 0.0]
    G = 3
    samples = []
    for b, c in enumerate(comps):
        g = b // G
        loss = [1] * len(c)
        if b in tools:
            for t in range(*tools[b]):
                loss[t] = 0
        if planted and b == 1:
            loss = loss[:-2]
        samples.append({
            "group_index": g, "index": b, "rollout_id": None, "prompt": "Q%d" % g, "tokens": prompts[g] + c,
            "multimodal_inputs": None, "multimodal_train_inputs": None, "multimodal_train_input_id": None,
            "apply_chat_template_kwargs": {}, "response": "A%d" % b, "response_length": len(c), "label": "42",
            "reward": rewards[b], "loss_mask": loss, "weight_versions": ["3"],
            "rollout_log_probs": [f32(logp(b, t)) for t in range(len(c))],
            "rollout_top_p_token_ids": None, "rollout_top_p_token_offsets": None, "rollout_routed_experts": None,
            "remove_sample": False, "teacher_log_probs": None, "status": "completed", "metadata": {},
            "generate_function_path": None, "custom_rm_path": None, "train_metadata": None, "session_id": None,
            "non_generation_time": 0.0,
            "spec_info": {"spec_accept_token_num": 0, "spec_draft_token_num": 0, "spec_verify_ct": 0, "completion_token_num": 0},
            "prefix_cache_info": {"cached_tokens": 0, "total_prompt_tokens": 0},
        })
    name = "slime-short-loss-mask.json" if planted else "slime-rollout-3.json"
    with open(os.path.join(OUT, name), "w") as f:
        f.write(json.dumps({"rollout_id": 3, "samples": samples}) + "\n")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    trl_two_ranks()
    verl_interleaved()
    openrlhf(False)
    openrlhf(True)
    prime_rl()
    nemo_rl(False)
    nemo_rl(True)
    slime(False)
    slime(True)
