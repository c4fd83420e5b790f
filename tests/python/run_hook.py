# Runs the Python hook of a docs/import/<trainer>.md page unchanged on synthetic tensors with the
# trainer's documented shapes (tests/io/format_hooks.test.ts then imports what it wrote):
#   python3 tests/python/run_hook.py trl|verl|openrlhf DOC.md OUT_DIR
# The trainer objects the hook touches are small stand-ins (no trl / verl / openrlhf installed);
# `safetensors` is the dependency-free shim in tests/python/shim (on PYTHONPATH).
import json
import os
import re
import sys
import types

import numpy as np
import torch

trainer, doc, out = sys.argv[1:4]
code = re.search(r"```python\n(.*?)```", open(doc).read(), re.S).group(1)
os.chdir(out)
PAD, EOS = 0, 2


class Obj(dict):
    """Attribute access over a dict (OmegaConf-like: .get works too)."""
    __getattr__ = dict.__getitem__


def trl():
    # _generate_and_score_completions of rank r: G = 4, 6 rows per rank, prompts left-padded (B, 5),
    # completions right-padded (B, 7), advantages (B), float32 log-probs, a 0-d num_items_in_batch.
    class GRPOTrainer:
        def __init__(self, rank):
            self.accelerator = Obj(process_index=rank, num_processes=2)
            self.processing_class = Obj(tokenizer=Obj(pad_token_id=PAD, eos_token_id=EOS))
            self.args = Obj(to_dict=lambda: {"num_generations": 4, "beta": 0.0, "loss_type": "dapo", "scale_rewards": "group",
                                             "gradient_accumulation_steps": 1, "report_to": ["none"], "lr_scheduler_type": "linear", "accelerator_config": object()})
            self.state = Obj(global_step=0, max_steps=40)
            self.rank = rank

        def _generate_and_score_completions(self, inputs):
            B, P, C = 6, 5, 7
            lens = [3 + (b + self.rank) % 4 for b in range(B)]
            cids = torch.full((B, C), PAD)
            cmask = torch.zeros(B, C, dtype=torch.long)
            for b, n in enumerate(lens):
                cids[b, :n] = torch.arange(40, 40 + n)
                cids[b, n - 1] = EOS
                cmask[b, :n] = 1
            pids = torch.tensor([[PAD, PAD, 11, 12, 13]] * B)
            return {"prompt_ids": pids, "prompt_mask": (pids != PAD).long(), "completion_ids": cids, "completion_mask": cmask,
                    "advantages": torch.linspace(-1, 1, B) + self.rank,
                    # TRL: accelerator.gather(completion_lengths).sum(), the same on every process.
                    "num_items_in_batch": torch.tensor(sum(3 + (b + r) % 4 for r in range(2) for b in range(B))),
                    "old_per_token_logps": -torch.rand(B, C, generator=torch.Generator().manual_seed(self.rank)) * cmask,
                    "sampling_per_token_logps": torch.zeros(B, C)}

    sys.modules["trl"] = types.SimpleNamespace(GRPOTrainer=GRPOTrainer)
    ns = {}
    exec(code, ns)
    for rank in range(2):
        ns["DumpGRPOTrainer"](rank)._generate_and_score_completions(inputs=[])


def verl():
    # DataProto after compute_advantage: n = 2, uids interleaved by _balance_batch, prompts (B, 4) left-padded,
    # responses (B, 3) right-padded, attention_mask (B, 7), advantages (B, 3) = scalar · response_mask.
    uid = np.array(["u1", "u0", "u1", "u0"], dtype=object)
    prompts = torch.tensor([[PAD, 11, 12, 13], [PAD, PAD, 21, 22], [PAD, 11, 12, 13], [PAD, PAD, 21, 22]])
    responses = torch.tensor([[40, EOS, PAD], [41, 42, EOS], [43, 44, EOS], [45, EOS, PAD]])
    response_mask = (torch.arange(3) <= (responses == EOS).long().argmax(1, keepdim=True)).long()
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0])
    adv = torch.tensor([0.5, -0.5, -0.5, 0.5]).unsqueeze(-1) * response_mask
    level = torch.zeros(4, 3)
    level[torch.arange(4), response_mask.sum(1) - 1] = scores
    batch = Obj(batch={"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
                       "attention_mask": torch.cat([(prompts != PAD).long(), response_mask], 1), "response_mask": response_mask,
                       "old_log_probs": -0.5 * response_mask.float(), "token_level_rewards": level, "advantages": adv},
                non_tensor_batch={"uid": uid})
    # The actor's batch sizes as verl's config holds them (the driver's, before fsdp_workers.py normalises them):
    # 2 prompts per mini-batch × n 2 // 1 GPU = 4 rows, micro-batches of 2 per GPU; the deprecated global size unset.
    config = Obj(actor_rollout_ref=Obj(rollout=Obj(n=2), actor=Obj(loss_agg_mode="token-mean", ppo_mini_batch_size=2, ppo_micro_batch_size=None,
                                                                   ppo_micro_batch_size_per_gpu=2, use_dynamic_bsz=False, ppo_max_token_len_per_gpu=16384, ulysses_sequence_parallel_size=1, strategy="fsdp")),
                 algorithm=Obj(adv_estimator="grpo", norm_adv_by_std_in_grpo=False), trainer=Obj(nnodes=1, n_gpus_per_node=1))
    ns = {}
    exec(code, ns)
    ns["dump_verl_batch"](batch, config, Obj(pad_token_id=PAD, eos_token_id=EOS), "verl_step1.safetensors")


def openrlhf():
    # GRPO as OpenRLHF's examples run it (--algo.kl.use_loss: the KL is a loss term, not in the reward, so the
    # advantages are the group_norm of the rewards on every action token).
    # Two Experiences of one step (n_samples_per_prompt = 2) with different widths T: sequences (B, T),
    # attention_mask (B, T), action_mask (B, T − 1) bool over sequences[:, 1:], per-action tensors (B, T − 1).
    def experience(index, prompt, responses, T, rewards):
        B = len(responses)
        seq = torch.full((B, T), PAD)
        attn = torch.zeros(B, T, dtype=torch.long)
        act = torch.zeros(B, T - 1, dtype=torch.bool)
        for b, r in enumerate(responses):
            s = prompt + r
            seq[b, :len(s)] = torch.tensor(s)
            attn[b, :len(s)] = 1
            act[b, len(prompt) - 1:len(s) - 1] = True
        lp = -0.3 * act.float()
        r = torch.tensor(rewards)
        adv = ((r - 0.5) / 0.5 ** 0.5).unsqueeze(-1) * act.float()  # group_norm of groups {1, 0}, over the actions
        return Obj(sequences=seq, attention_mask=attn, action_mask=act, action_log_probs=lp, base_action_log_probs=lp * 1.1,
                   rollout_log_probs=None, advantages=adv, returns=adv, rewards=r, index=index)

    exps = [experience([0, 2], [11, 12], [[40, EOS], [41, 42, EOS]], 6, [1.0, 0.0]), experience([1, 3], [21, 22, 23], [[43, EOS], [44, EOS]], 5, [0.0, 1.0])]
    ns = {}
    exec(code, ns)
    for i, exp in enumerate(exps):
        ns["dump_experience"](exp, Obj(rollout=Obj(n_samples_per_prompt=2), algo=Obj(advantage=Obj(estimator="group_norm"), kl=Obj(use_loss=True, init_coef=0.01))), Obj(pad_token_id=PAD, eos_token_id=EOS), f"exp_0_{i}.safetensors")


{"trl": trl, "verl": verl, "openrlhf": openrlhf}[trainer]()
print(json.dumps(sorted(os.listdir("."))))
