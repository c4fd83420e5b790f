# Runs the grpo_studio_dump package (python/, imported from the source tree) on objects SHAPED like each
# trainer's — TRL's _generate_and_score_completions dict with a trainer that has .args.to_dict(), .state,
# .accelerator and .processing_class; a verl DataProto (.batch a TensorDict-like mapping, .non_tensor_batch
# with uid, .meta_info) with an OmegaConf config; OpenRLHF Experience dataclasses with nested or flat args;
# NeMo-RL's grpo_train train_data (a BatchedDataDict-like mapping) — on synthetic tensors, and writes what
# tests/io/python_dump.test.ts reads back with the TypeScript importer:
#   python3 tests/python/dump_package.py MODE OUT_DIR
# MODE: "safetensors" (torch tensors, safetensors.torch.save_file: tests/python/shim on PYTHONPATH),
#       "torch" (torch tensors, no safetensors package: the bundled writer),
#       "pure" (GRPO_STUDIO_DUMP_PURE=1; torch, numpy, safetensors made unimportable; plain Python lists).
# Prints {"writer": …, "pyproject": …, "trl": {"files", "expect"}, "verl": …, "openrlhf": …, "nemo_rl": …} as
# JSON; each "expect" holds the canonical grpo-batch/v1 fields the import must give (rows in merged order).
import dataclasses
import json
import os
import pathlib
import statistics
import sys
import types

mode, out = sys.argv[1:3]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if mode == "pure":
    os.environ["GRPO_STUDIO_DUMP_PURE"] = "1"
    for m in ("torch", "numpy", "safetensors", "safetensors.torch"):
        sys.modules[m] = None  # import raises ImportError: as on a machine without them
else:
    os.environ.pop("GRPO_STUDIO_DUMP_PURE", None)
    import torch
sys.path.insert(0, os.path.join(root, "python"))

# verl's driver config is an OmegaConf DictConfig; omegaconf is not installed here, so a stand-in module with
# the two names the package uses (DictConfig, OmegaConf.to_container(resolve=True)).
omegaconf = types.ModuleType("omegaconf")


class DictConfig:
    def __init__(self, d):
        self._d = d

    def __getattr__(self, k):
        v = self._d[k]
        return DictConfig(v) if isinstance(v, dict) else v


def to_container(cfg, resolve=False):
    assert resolve is True, "the package must resolve interpolations"
    return json.loads(json.dumps(cfg._d))


DictConfig.__module__ = "omegaconf.dictconfig"
omegaconf.DictConfig = DictConfig
omegaconf.OmegaConf = types.SimpleNamespace(to_container=to_container)
sys.modules["omegaconf"] = omegaconf

import grpo_studio_dump as gsd  # noqa: E402  (after the import blocks above)
from grpo_studio_dump import _writer  # noqa: E402

assert ("torch" in sys.modules and sys.modules["torch"] is not None) == (mode != "pure")
writer = {"safetensors": "safetensors", "torch": "bundled", "pure": "bundled"}[mode]
assert (_writer._safetensors_save_file() is not None) == (mode == "safetensors"), mode

PAD, EOS = 0, 2


def T(x, dtype="long"):
    """A torch tensor of the trainer's dtype, or the plain list in pure mode."""
    if mode == "pure":
        return x
    return torch.tensor(x, dtype={"long": torch.long, "float": torch.float32, "bool": torch.bool, "bf16": torch.bfloat16}[dtype])


def L(t):
    """What the file holds, as Python numbers (float32 values exactly)."""
    return t if isinstance(t, list) else t.tolist()


def group_adv(rewards, G, eps, scale=True, unbiased=True):
    out = []
    for g in range(0, len(rewards), G):
        r = rewards[g:g + G]
        mean = sum(r) / len(r)
        std = statistics.stdev(r) if unbiased else statistics.pstdev(r)
        out += [(x - mean) / (std + eps) if scale else x - mean for x in r]
    return out


class Obj(dict):
    __getattr__ = dict.__getitem__


# ------------------------------------------------------------------------------------------- TRL
# Two ranks of a dapo run, G = 4, 6 rows per rank (group 1 is cut by process_slice), prompts left-padded (B, 5),
# completions right-padded (B, 7) ending in EOS, advantages (B) from the gathered rewards (TRL: unbiased std, ε 1e-4).
def trl():
    B, P, C, G, R = 6, 5, 7, 4, 2
    rewards = [1.0, 0.0, 0.5, 0.0, 1.0, 0.0, 0.2, 1.0, 0.0, 1.0, 0.3, 0.0]
    adv_all = group_adv(rewards, G, 1e-4)
    args = {"num_generations": G, "beta": 0.07, "loss_type": "dapo", "epsilon": 0.25, "scale_rewards": "group", "temperature": 0.9,
            "gradient_accumulation_steps": 2, "max_completion_length": C, "lr_scheduler_type": "cosine", "learning_rate": 3e-6,
            "report_to": ["none"], "accelerator_config": {"split_batches": False}, "logging_dir": pathlib.PurePosixPath("runs/x"), "max_grad_norm": 0.5}
    files, exp = [], {k: [] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages", "old_per_token_logps", "sampling_per_token_logps")}
    # num_items_in_batch: the loss-mask tokens of the whole generation batch, gathered over every process (the same on each rank).
    items = sum(2 + (b + rank) % 5 for rank in range(R) for b in range(B))
    for rank in range(R):
        lens = [2 + (b + rank) % 5 for b in range(B)]
        cids = [[40 + t + b for t in range(n - 1)] + [EOS] + [PAD] * (C - n) for b, n in enumerate(lens)]
        cmask = [[1] * n + [0] * (C - n) for n in lens]
        pids = [[PAD] * (b % 3) + [11 + b + t for t in range(P - b % 3)] for b in range(B)]
        pmask = [[0] * (b % 3) + [1] * (P - b % 3) for b in range(B)]
        old = [[-(0.125 * (t + 1) + 0.01 * b + 0.1 * rank) * m for t, m in enumerate(row)] for b, row in enumerate(cmask)]
        samp = [[x - 0.0625 * m for x, m in zip(r, mr)] for r, mr in zip(old, cmask)]  # vLLM's, padded with 0
        adv = adv_all[rank * B:(rank + 1) * B]
        outputs = {"prompt_ids": T(pids), "prompt_mask": T(pmask), "completion_ids": T(cids), "completion_mask": T(cmask),
                   "advantages": T(adv, "float"), "old_per_token_logps": T(old, "float"), "sampling_per_token_logps": T(samp, "float"),
                   "num_items_in_batch": T(items) if mode != "pure" else items,
                   "max_left_pad": None, "images": None}
        trainer = types.SimpleNamespace(
            args=types.SimpleNamespace(to_dict=lambda: dict(args)),
            state=types.SimpleNamespace(global_step=3, max_steps=50, epoch=0.1),
            accelerator=types.SimpleNamespace(process_index=rank, num_processes=R),
            processing_class=types.SimpleNamespace(tokenizer=types.SimpleNamespace(pad_token_id=PAD, eos_token_id=EOS)))  # a processor
        path = gsd.dump_trl(trainer, outputs, os.path.join(out, "trl_rank%d.safetensors" % rank), rewards=rewards, metrics={"kl": 0.0})
        files.append(os.path.basename(path))
        for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages", "old_per_token_logps", "sampling_per_token_logps"):
            exp[k] += L(outputs[k])
    # The default path: grpo_step{global_step}_rank{rank}.safetensors in the working directory.
    cwd = os.getcwd()
    os.chdir(out)
    try:
        default = gsd.dump_trl(trainer, outputs)
    finally:
        os.chdir(cwd)
    assert default == "grpo_step3_rank1.safetensors", default
    os.remove(os.path.join(out, default))
    return {"files": files, "expect": exp}


# ------------------------------------------------------------------------------------------- verl
# A DataProto after compute_advantage: n = 3, rows of 2 prompts interleaved (_balance_batch), prompts (B, 4)
# left-padded, responses (B, 5) right-padded after EOS, attention_mask (B, 9), advantages (B, 5) = the GRPO
# scalar (verl: unbiased std, ε 1e-6) × response_mask, token_level_rewards with the score on the last token.
class TensorDictLike:
    """verl's DataProto.batch is a TensorDict: keys(), items(), [key], batch_size."""

    def __init__(self, d):
        self._d = d

    def keys(self):
        return self._d.keys()

    def items(self):
        return self._d.items()

    def __getitem__(self, k):
        return self._d[k]


@dataclasses.dataclass
class DataProto:
    batch: TensorDictLike
    non_tensor_batch: dict
    meta_info: dict


def verl():
    uid = ["p1", "p0", "p1", "p0", "p0", "p1"]
    plens = {"p0": 2, "p1": 4}
    rlens = [2, 5, 3, 4, 1, 5]
    scores = [1.0, 0.0, 0.0, 1.0, 1.0, 0.5]
    B, P, R = 6, 4, 5
    prompts = [[PAD] * (P - plens[u]) + [11 + t + 10 * int(u[1]) for t in range(plens[u])] for u in uid]
    responses = [[40 + b + t for t in range(n - 1)] + [EOS] + [PAD] * (R - n) for b, n in enumerate(rlens)]
    rmask = [[1] * n + [0] * (R - n) for n in rlens]
    attn = [[int(x != PAD) for x in p] + m for p, m in zip(prompts, rmask)]
    order = {u: [b for b in range(B) if uid[b] == u] for u in ("p0", "p1")}
    scalar = [0.0] * B
    for u, rows in order.items():
        a = group_adv([scores[b] for b in rows], len(rows), 1e-6, scale=False)
        for b, x in zip(rows, a):
            scalar[b] = x
    adv = [[scalar[b] * m for m in rmask[b]] for b in range(B)]
    level = [[scores[b] if t == rlens[b] - 1 else 0.0 for t in range(R)] for b in range(B)]
    old = [[-(0.25 + 0.015625 * t + 0.03125 * b) * m for t, m in enumerate(rmask[b])] for b in range(B)]
    ref = [[x - 0.125 * m for x, m in zip(old[b], rmask[b])] for b in range(B)]
    tensors = {"prompts": T(prompts), "responses": T(responses), "input_ids": T([p + r for p, r in zip(prompts, responses)]),
               "attention_mask": T(attn), "response_mask": T(rmask), "old_log_probs": T(old, "float"), "ref_log_prob": T(ref, "float"),
               "token_level_rewards": T(level, "float"), "token_level_scores": T(level, "float"), "advantages": T(adv, "float"),
               "position_ids": T([[max(0, i - (P - plens[u])) for i in range(P + R)] for u in uid])}
    config = DictConfig({
        "algorithm": {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": False, "gamma": 1.0, "rollout_correction": {"rollout_is": None}},
        "actor_rollout_ref": {"rollout": {"n": 3, "temperature": 0.7, "name": "vllm"},
                              "actor": {"loss_agg_mode": "seq-mean-token-sum", "clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28,
                                        "ppo_mini_batch_size": 2, "ppo_micro_batch_size": None, "ppo_micro_batch_size_per_gpu": 2, "strategy": "fsdp",
                                        "ulysses_sequence_parallel_size": 1, "use_kl_loss": True, "kl_loss_coef": 0.003, "kl_loss_type": "low_var_kl",
                                        "policy_loss": {"loss_mode": "vanilla"}, "optim": {"lr": 1e-6}},
                              "model": {"path": "Qwen/Qwen3-0.6B"}},
        "trainer": {"nnodes": 1, "n_gpus_per_node": 2, "total_epochs": 1, "logger": ["console"]},
        "data": {"train_batch_size": 2, "max_prompt_length": P, "max_response_length": R},
    })
    meta_info = {"eos_token_id": EOS, "pad_token_id": PAD, "temperature": 0.7, "global_token_num": [sum(a) for a in attn], "global_steps": 1}
    batch = DataProto(TensorDictLike(tensors), {"uid": uid if mode == "pure" else __import__("numpy").array(uid, dtype=object), "raw_prompt_ids": [None] * B}, meta_info)
    path = gsd.dump_verl(batch, config, types.SimpleNamespace(pad_token_id=PAD, eos_token_id=EOS), os.path.join(out, "verl_step1.safetensors"))
    exp = {"prompt_ids": L(tensors["prompts"]), "prompt_mask": [a[:P] for a in attn], "completion_ids": L(tensors["responses"]), "completion_mask": L(tensors["response_mask"]),
           "old_per_token_logps": L(tensors["old_log_probs"]), "ref_per_token_logps": L(tensors["ref_log_prob"]), "per_token_advantages": L(tensors["advantages"]),
           "advantages": [L(tensors["advantages"])[b][0] for b in range(B)], "rewards": scores, "group_ids": [0, 1, 0, 1, 1, 0]}
    return {"files": [os.path.basename(path)], "expect": exp}


# ------------------------------------------------------------------------------------------- OpenRLHF
# Two Experiences of one step (n_samples_per_prompt = 2) of different widths T: sequences (B, T) = prompt ⧺
# response ⧺ right pad, attention_mask, action_mask (B, T − 1) bool over sequences[:, 1:], action_log_probs ×
# action_mask, advantages = the group-normalised reward (group_norm: (r − mean) / (std + 1e-9), torch's unbiased
# std; groups = index // n) broadcast over the actions.
@dataclasses.dataclass
class Experience:
    index: list
    sequences: object
    attention_mask: object
    action_mask: object
    action_log_probs: object = None
    base_action_log_probs: object = None
    rollout_log_probs: object = None
    values: object = None
    returns: object = None
    advantages: object = None
    kl: object = None
    rewards: object = None
    info: dict = dataclasses.field(default_factory=dict)


def openrlhf():
    exp_out = {k: [] for k in ("prompt_ids", "completion_ids", "completion_mask", "old_per_token_logps", "ref_per_token_logps", "sampling_per_token_logps", "advantages", "rewards", "group_ids")}

    by_index = {0: 1.0, 1: 0.0, 2: 0.0, 3: 1.0, 4: 0.25, 5: 0.5}  # group = index // 2: {0, 1}, {2, 3}, {4, 5}
    adv_of = dict(zip(sorted(by_index), group_adv([by_index[i] for i in sorted(by_index)], 2, 1e-9)))

    def experience(index, prompts, responses, T_):
        rewards = [by_index[i] for i in index]
        seq, attn, act, lp, rlp = [], [], [], [], []
        adv_s = [adv_of[i] for i in index]
        for b, r in enumerate(responses):
            prompt = prompts[b]
            s = prompt + r
            seq.append(s + [PAD] * (T_ - len(s)))
            attn.append([1] * len(s) + [0] * (T_ - len(s)))
            a = [1 if len(prompt) - 1 <= j < len(s) - 1 else 0 for j in range(T_ - 1)]
            act.append(a)
            lp.append([-(0.375 + 0.0625 * j + 0.125 * b) * m for j, m in enumerate(a)])
            rlp.append([x - 0.03125 * m for x, m in zip(lp[-1], a)])
        adv = [[x * m for m in a] for x, a in zip(adv_s, act)]
        e = Experience(index=index, sequences=T(seq), attention_mask=T(attn), action_mask=T([[bool(m) for m in a] for a in act], "bool"),
                       action_log_probs=T(lp, "float"), base_action_log_probs=T([[x * 1.5 for x in r] for r in lp], "float"), rollout_log_probs=T(rlp, "float"),
                       advantages=T(adv, "float"), returns=T(adv, "float"), rewards=T(rewards, "float"), info={"reward": rewards})
        for b in range(len(responses)):
            first = len(prompts[b]) - 1
            exp_out["prompt_ids"].append(L(e.sequences)[b][:first + 1])
            exp_out["completion_ids"].append(L(e.sequences)[b][first + 1:])
            exp_out["completion_mask"].append([int(m) for m in L(e.action_mask)[b][first:]])
            exp_out["old_per_token_logps"].append(L(e.action_log_probs)[b][first:])
            exp_out["ref_per_token_logps"].append(L(e.base_action_log_probs)[b][first:])
            exp_out["sampling_per_token_logps"].append(L(e.rollout_log_probs)[b][first:])
            exp_out["advantages"].append(L(e.advantages)[b][first])
            exp_out["rewards"].append(L(e.rewards)[b])
            exp_out["group_ids"].append(index[b] // 2)
        return e

    A, B_, C = [11, 12], [21, 22, 23], [31, 32, 33, 34]  # the prompts of groups 0, 1, 2 (index // 2); each group split over both files
    exps = [experience([0, 2, 4], [A, B_, C], [[40, EOS], [41, 42, EOS], [48, 49, EOS]], 8),
            experience([1, 3, 5], [A, B_, C], [[43, EOS], [44, 45, 46, EOS], [EOS]], 9)]
    # GRPO with the KL as a loss term (--algo.kl.use_loss): base_action_log_probs kept, one advantage per sample.
    if mode == "pure":  # args flat, as vars(args) before hierarchize
        args = {"rollout.n_samples_per_prompt": 2, "actor.eps_clip": 0.3, "actor.policy_loss_type": "ppo", "algo.kl.init_coef": 0.02, "algo.kl.use_loss": True, "algo.advantage.estimator": "group_norm", "actor.learning_rate": 5e-7}
    else:  # nested, as OpenRLHF holds them after hierarchize
        N = types.SimpleNamespace
        args = N(rollout=N(n_samples_per_prompt=2, temperature=1.0), actor=N(eps_clip=0.3, policy_loss_type="ppo", learning_rate=5e-7),
                 algo=N(kl=N(init_coef=0.02, use_loss=True, estimator="k3"), advantage=N(estimator="group_norm")), seed=42)
    paths = gsd.dump_openrlhf(exps, args, types.SimpleNamespace(pad_token_id=PAD, eos_token_id=EOS), os.path.join(out, "exp_{i}.safetensors"))
    return {"files": [os.path.basename(p) for p in paths], "expect": exp_out}


# ------------------------------------------------------------------------------------------- NeMo-RL
# grpo_train's train_data where it logs "train_data_step{N}.jsonl": two prompts × 3 generations, input_ids (B, 12)
# = prompt ⧺ generation ending in EOS, right-padded with PAD past input_lengths; token_mask 1 on the generation only;
# sample_mask (loss_multiplier, float) 0 on row 4; advantages (B, 12) = the per-sample GRPO value (no leave-one-out,
# normalize_rewards: (r − mean) / (Bessel std + 1e-6)) over every column; generation_logprobs 0 off the generation,
# prev_logprobs over the whole sequence (0 for the first token). Written by dump_nemo_rl from the train_data names,
# from grpo.py's log_data names, and compared byte for byte with a transcription of the trainer's own writer.
def nemo_rl():
    S = 12
    prompts = [[11, 12, 13]] * 3 + [[21, 22, 23, 24, 25]] * 3
    gens = [4, 6, 2, 3, 5, 7]
    rewards = [1.0, 0.0, 0.5, 0.0, 1.0, 1.0]
    sample_mask = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    adv_s = group_adv(rewards, 3, 1e-6)
    B = len(prompts)
    ids, tmask, lens, adv, gen, prev = [], [], [], [], [], []
    for b, (p, n) in enumerate(zip(prompts, gens)):
        row = p + [40 + b + t for t in range(n - 1)] + [EOS]
        lens.append(len(row))
        ids.append(row + [PAD] * (S - len(row)))
        tmask.append([0] * len(p) + [1] * n + [0] * (S - len(row)))
        adv.append([adv_s[b]] * S)
        gen.append([-(0.125 * (t - len(p) + 1) + 0.015625 * b) if m else 0.0 for t, m in enumerate(tmask[b])])
        prev.append([0.0 if t == 0 or t >= len(row) else (g - 0.0625 if m else -0.5) for t, (g, m) in enumerate(zip(gen[b], tmask[b]))])
    train_data = {"input_ids": T(ids), "input_lengths": T(lens), "advantages": T(adv, "float"), "generation_logprobs": T(gen, "float"),
                  "token_mask": T(tmask), "sample_mask": T(sample_mask, "float"), "prev_logprobs": T(prev, "float")}
    reward_t = T(rewards, "float")
    content = [["Solve %d + %d." % (b, b), "Voilà: %d" % (2 * b)] for b in range(B)]
    path = gsd.dump_nemo_rl(train_data, out, step=3, rewards=reward_t, content=content)
    assert path == os.path.join(out, "train_data_step3.jsonl"), path

    # grpo.py: log_data = {content, rewards, input_lengths, token_ids, …}.tolist(); Logger.log_batched_dict_as_jsonl:
    # for i, sample in enumerate(BatchedDataDict(log_data).make_microbatch_iterator(1)): json.dumps({**sample, "idx": i}).
    log_data = {"content": content, "rewards": L(reward_t), "input_lengths": L(train_data["input_lengths"]), "token_ids": L(train_data["input_ids"]),
                "token_loss_mask": L(train_data["token_mask"]), "sample_loss_mask": L(train_data["sample_mask"]), "advantages": L(train_data["advantages"]),
                "generation_logprobs": L(train_data["generation_logprobs"]), "prev_logprobs": L(train_data["prev_logprobs"])}
    trainer = "".join(json.dumps({**{k: v[i:i + 1] for k, v in log_data.items()}, "idx": i}) + "\n" for i in range(B))
    with open(path, encoding="utf-8") as f:
        written = f.read()
    assert written == trainer, "dump_nemo_rl differs from NeMo-RL's log_batched_dict_as_jsonl"
    again = gsd.dump_nemo_rl(log_data, os.path.join(out, "log_data_step{step}.jsonl"), step=3)  # grpo.py's log_data, as is
    with open(again, encoding="utf-8") as f:
        assert f.read() == trainer, "dump_nemo_rl(log_data) differs"
    os.remove(again)

    P = [len(p) for p in prompts]
    exp = {"prompt_ids": [L(train_data["input_ids"])[b][:P[b]] for b in range(B)],
           "completion_ids": [L(train_data["input_ids"])[b][P[b]:] for b in range(B)],
           "completion_mask": [[m * int(sample_mask[b]) for m in L(train_data["token_mask"])[b][P[b]:]] for b in range(B)],
           "sampling_per_token_logps": [L(train_data["generation_logprobs"])[b][P[b]:] for b in range(B)],
           "old_per_token_logps": [L(train_data["prev_logprobs"])[b][P[b]:] for b in range(B)],
           "per_token_advantages": [L(train_data["advantages"])[b][P[b]:] for b in range(B)],
           "advantages": [L(train_data["advantages"])[b][0] for b in range(B)], "rewards": L(reward_t), "group_ids": [0, 0, 0, 1, 1, 1]}
    return {"files": [os.path.basename(path)], "expect": exp}


def pyproject():
    """pyproject.toml parsed by tomllib (3.11+), and the in-tree backend's own reading of it."""
    import tomllib

    sys.path.insert(0, os.path.join(root, "python", "_backend"))
    import grpo_studio_build

    import zipfile

    with open(os.path.join(root, "python", "pyproject.toml"), "rb") as f:
        toml = tomllib.load(f)
    # The wheel `pip install ./python` installs, built by the same backend call pip makes (no pip needed here).
    os.makedirs(os.path.join(out, "wheel"))
    wheel = grpo_studio_build.build_wheel(os.path.join(out, "wheel"))
    with zipfile.ZipFile(os.path.join(out, "wheel", wheel)) as z:
        names = sorted(n for n in z.namelist() if "__pycache__" not in n)
        metadata = z.read([n for n in names if n.endswith("/METADATA")][0]).decode()
    return {"toml": toml, "backend": grpo_studio_build.project(), "version": gsd.__version__, "wheel": wheel, "wheel_files": names,
            "metadata": metadata.split("\n\n")[0].splitlines()}


result = {"mode": mode, "writer": writer, "pyproject": pyproject(), "trl": trl(), "verl": verl(), "openrlhf": openrlhf(), "nemo_rl": nemo_rl()}
print(json.dumps(result))
