"""One call at each trainer's hook point (docs/import/python.md). Each writes exactly what GRPO Studio's
readers take (src/io/formats/trl.ts, verl.ts, openrlhf.ts, nemo_rl.ts): the trainer's own tensors under its own names,
and its own carriers of settings and ids in the metadata, as the trainer holds them."""
import json
import os
import warnings
from collections.abc import Mapping

from . import _json
from ._writer import is_numpy_array, is_tensor, is_torch_tensor, save


def _tokenizer_ids(tokenizer):
    """pad / EOS ids of a tokenizer or processor (its .tokenizer), None where it has none."""
    tok = getattr(tokenizer, "tokenizer", tokenizer)
    ids = {}
    for key in ("pad_token_id", "eos_token_id"):
        v = getattr(tok, key, None) if tok is not None else None
        if v is None and isinstance(tok, Mapping):
            v = tok.get(key)
        if v is not None:
            ids[key] = _json.dumps(v)
    return ids


def _extras(meta, metrics, run):
    if metrics is not None:
        meta["metrics"] = _json.dumps(metrics)
    if run is not None:
        meta["run"] = _json.dumps(run)
    return meta


def _items(mapping):
    """(key, value) of a dict, a TensorDict (verl's DataProto.batch) or any mapping-like object."""
    if mapping is None:
        return []
    if hasattr(mapping, "items"):
        return list(mapping.items())
    return [(k, mapping[k]) for k in mapping.keys()]


def _rows(x):
    shape = getattr(x, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else None
    return len(x) if isinstance(x, (list, tuple)) else None


# ---------------------------------------------------------------------------------------------------- TRL

def dump_trl(trainer, outputs, path=None, *, rewards=None, rewards_per_func=None, reward_weights=None,
             prompts=None, completions=None, metrics=None, run=None):
    """TRL GRPOTrainer: call in a subclass's `_generate_and_score_completions` on the dict the parent returns.

    Saves every tensor of `outputs` under TRL's names (prompt_ids, completion_mask, advantages,
    old_per_token_logps, sampling_per_token_logps, tool_mask, num_items_in_batch, …) and in the metadata
    `config` = trainer.args.to_dict(), `rank` / `num_processes` (trainer.accelerator), `global_step` /
    `max_steps` (trainer.state), `pad_token_id` / `eos_token_id` (trainer.processing_class, or its
    .tokenizer). Optional per-sample lists: `rewards` (NaN → null), `rewards_per_func` (None / NaN → null:
    a function that returned None), `reward_weights` (default trainer.reward_weights when rewards_per_func is
    given), `prompts` and `completions` (texts); `metrics` and `run` as JSON objects.
    Default path: grpo_step{global_step}_rank{rank}.safetensors. Returns the path written."""
    acc = trainer.accelerator
    rank, num_processes = int(acc.process_index), int(acc.num_processes)
    state = trainer.state
    step = getattr(state, "global_step", None)
    if path is None:
        path = "grpo_step%s_rank%d.safetensors" % (step if step is not None else 0, rank)
    tensors = {}
    for k, v in _items(outputs):
        if isinstance(v, (bool, int, float)) and k == "num_items_in_batch":
            tensors[k] = v
        elif v is not None and not isinstance(v, (str, bytes, Mapping)) and is_tensor(v):
            tensors[k] = v
    for k in ("prompt_ids", "completion_ids", "completion_mask"):
        if k not in tensors:
            raise ValueError("dump_trl: outputs has no tensor %r (pass the dict _generate_and_score_completions returns)" % k)
    meta = {"config": _json.dumps(trainer.args.to_dict()), "rank": str(rank), "num_processes": str(num_processes)}
    meta.update(_tokenizer_ids(getattr(trainer, "processing_class", None)))
    if step is not None:
        meta["global_step"] = str(int(step))
    max_steps = getattr(state, "max_steps", None)
    if max_steps:  # TrainerState.max_steps is 0 until train() sets it
        meta["max_steps"] = str(int(max_steps))
    if rewards is not None:
        meta["rewards"] = _json.dumps(rewards, nan=None)
    if rewards_per_func is not None:
        meta["rewards_per_func"] = _json.dumps(rewards_per_func, nan=None)
        if reward_weights is None:
            reward_weights = getattr(trainer, "reward_weights", None)
    if reward_weights is not None:
        meta["reward_weights"] = _json.dumps(reward_weights)
    if prompts is not None:
        meta["prompts"] = _json.dumps([p if isinstance(p, str) else _json.jsonable(p) for p in prompts])
    if completions is not None:
        meta["completions"] = _json.dumps([c if isinstance(c, str) else _json.jsonable(c) for c in completions])
    save(tensors, path, _extras(meta, metrics, run))
    return os.fspath(path)


# ---------------------------------------------------------------------------------------------------- verl

def dump_verl(batch, config, tokenizer, path, *, metrics=None, run=None):
    """verl: call in RayPPOTrainer.fit right after `batch = compute_advantage(batch, …)`.

    `batch` is the DataProto: every tensor of batch.batch (prompts, responses, input_ids, attention_mask,
    response_mask, old_log_probs, ref_log_prob, rollout_log_probs, token_level_rewards, advantages, …) under
    verl's names; non_tensor_batch["uid"] (which rows share a prompt) and meta_info in the metadata.
    `config` is the trainer's config as verl holds it (OmegaConf.to_container(config, resolve=True) of an
    OmegaConf object; a dict or dataclass as is). pad / EOS ids: meta_info's, else the tokenizer's.
    Returns the path written."""
    tensors = {k: v for k, v in _items(batch.batch) if v is not None and not isinstance(v, (str, bytes, Mapping)) and is_tensor(v)}
    for k in ("prompts", "responses"):
        if k not in tensors:
            raise ValueError("dump_verl: batch.batch has no tensor %r" % k)
    non_tensor = getattr(batch, "non_tensor_batch", None) or {}
    if "uid" not in non_tensor:
        raise ValueError("dump_verl: batch.non_tensor_batch has no \"uid\": groups cannot be formed (verl reorders rows)")
    uid = [str(u) for u in _json.jsonable(non_tensor["uid"])]
    meta_info = _json.jsonable(getattr(batch, "meta_info", None) or {})
    if not isinstance(meta_info, dict):
        raise ValueError("dump_verl: batch.meta_info is not a mapping")
    cfg = _json.jsonable(_json.omegaconf_container(config)) if config is not None else {}
    if not isinstance(cfg, dict):
        raise ValueError("dump_verl: config is not a mapping (pass the trainer's config, self.config)")
    meta = {"uid": _json.dumps(uid), "config": _json.dumps(cfg), "meta_info": _json.dumps(meta_info)}
    for k, v in _tokenizer_ids(tokenizer).items():
        if k not in meta_info:
            meta[k] = v
    save(tensors, path, _extras(meta, metrics, run))
    return os.fspath(path)


# ---------------------------------------------------------------------------------------------------- OpenRLHF

OPENRLHF_KEYS = ["sequences", "attention_mask", "action_mask", "action_log_probs", "base_action_log_probs", "rollout_log_probs",
                 "advantages", "returns", "rewards", "values", "kl", "scores", "response_length", "truncated", "total_length"]


def _arg(args, dotted):
    """args.a.b (nested, as hierarchize leaves them), args["a.b"] / getattr(args, "a.b") (flat), or None."""
    a = _json.jsonable(args)
    if not isinstance(a, dict):
        return None
    if dotted in a:
        return a[dotted]
    for part in dotted.split("."):
        if not isinstance(a, dict) or part not in a:
            return None
        a = a[part]
    return a


def _experience_paths(path, n):
    path = os.fspath(path)
    if "{i}" in path:
        return [path.format(i=i) for i in range(n)]
    if n == 1:
        return [path]
    stem, ext = os.path.splitext(path)
    return ["%s_%d%s" % (stem, i, ext or ".safetensors") for i in range(n)]


def dump_openrlhf(experiences, args, tokenizer, path, *, metrics=None, run=None):
    """OpenRLHF: call in PPOTrainer.train_step after `experiences = self.experience_maker.make_experience_batch(…)`.

    One file per Experience (a list, or one Experience): its tensors under OpenRLHF's names (sequences,
    attention_mask, action_mask, action_log_probs, base_action_log_probs, rollout_log_probs, advantages,
    returns, rewards, …), `index` (each row's sample position), `n_samples_per_prompt`
    (args.rollout.n_samples_per_prompt, nested or flat), `config` = the args as the trainer holds them
    (nested or flat), and the tokenizer's pad / EOS ids in the metadata. `path` names the file of one
    experience; for several, "{i}" in it is replaced by the experience's number, else _0, _1, … is added
    before the extension. Returns the paths written."""
    exps = list(experiences) if isinstance(experiences, (list, tuple)) else [experiences]
    n = _arg(args, "rollout.n_samples_per_prompt")
    if n is None:
        n = _arg(args, "n_samples_per_prompt")
    config = _json.dumps(args)
    ids = _tokenizer_ids(tokenizer)
    paths = _experience_paths(path, len(exps))
    for exp, p in zip(exps, paths):
        tensors = {}
        for k in OPENRLHF_KEYS:
            v = getattr(exp, k, None) if not isinstance(exp, Mapping) else exp.get(k)
            if v is not None and not isinstance(v, (str, bytes, Mapping)) and is_tensor(v):
                tensors[k] = v
        for k in ("sequences", "action_mask"):
            if k not in tensors:
                raise ValueError("dump_openrlhf: the experience has no tensor %r" % k)
        B = _rows(tensors["sequences"])
        for k in list(tensors):
            if _rows(tensors[k]) != B:
                warnings.warn("dump_openrlhf: %s has %s rows, sequences %s: not saved" % (k, _rows(tensors[k]), B))
                del tensors[k]
        index = getattr(exp, "index", None) if not isinstance(exp, Mapping) else exp.get("index")
        if index is None:
            raise ValueError("dump_openrlhf: the experience has no index (each row's sample position): groups cannot be formed")
        meta = {"index": _json.dumps(_json.ints(index, "Experience.index")), "config": config}
        if n is not None:
            meta["n_samples_per_prompt"] = _json.dumps(n)
        meta.update(ids)
        save(tensors, p, _extras(meta, metrics, run))
    return paths


# ---------------------------------------------------------------------------------------------------- NeMo-RL

# (key written, NeMo-RL's train_data name), in the order grpo.py builds log_data ("Log training data").
NEMO_RL_KEYS = [("agent_ref", None), ("content", None), ("rewards", None), ("filtered_rewards", None), ("input_lengths", None),
                ("token_ids", "input_ids"), ("token_loss_mask", "token_mask"), ("sample_loss_mask", "sample_mask"),
                ("advantages", None), ("generation_logprobs", None), ("prev_logprobs", None)]


def _plain(x):
    """What NeMo-RL's `.tolist()` gives: tensors / numpy arrays as nested lists, numpy scalars as numbers."""
    if is_torch_tensor(x) or is_numpy_array(x):
        return x.tolist()
    if type(x).__module__.split(".")[0] == "numpy" and hasattr(x, "item"):
        return x.item()
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _nemo_rl_path(path, step):
    path = os.fspath(path)
    if os.path.isdir(path) or path.endswith(("/", os.sep)):
        if step is None:
            raise ValueError("dump_nemo_rl: %r is a directory: pass step= (the file is train_data_step{step}.jsonl)" % path)
        return os.path.join(path, "train_data_step%d.jsonl" % int(step))
    if "{step}" in path:
        if step is None:
            raise ValueError("dump_nemo_rl: %r has {step}: pass step=" % path)
        return path.replace("{step}", str(int(step)))
    return path


def dump_nemo_rl(train_data, path, *, step=None, rewards=None, filtered_rewards=None, content=None, agent_ref=None):
    """NeMo-RL GRPO: call in grpo_train where it logs the training data (after train_data["prev_logprobs"] is set).

    Writes what NeMo-RL's own Logger.log_batched_dict_as_jsonl writes for `train_data_step{N}.jsonl`: one JSON
    line per sample, every key holding a one-element list (the row), plus "idx". `train_data` is the
    BatchedDataDict (or any mapping) as grpo.py holds it — input_ids (B, S), input_lengths (B), token_mask (B, S),
    sample_mask (B), advantages / generation_logprobs / prev_logprobs (B, S) — torch tensors, numpy arrays or
    plain lists; the logged names (token_ids, token_loss_mask, sample_loss_mask) are taken too, so grpo.py's
    log_data can be passed as is. `rewards` / `filtered_rewards` / `content` / `agent_ref` (per sample; not in
    train_data) are written when given or when the mapping has them. `path` is the file; a directory (with
    `step`) gets train_data_step{step}.jsonl, and "{step}" in `path` is replaced by `step` (the importer reads
    the step from that file name). Returns the path written."""
    items = dict(_items(train_data))
    given = {"rewards": rewards, "filtered_rewards": filtered_rewards, "content": content, "agent_ref": agent_ref}
    cols = []
    for key, alias in NEMO_RL_KEYS:
        v = given.get(key)
        if v is None:
            v = items.get(key)
        if v is None and alias is not None:
            v = items.get(alias)
        if v is not None:
            cols.append((key, _plain(v)))
    names = [k for k, _ in cols]
    for k, alias in (("token_ids", "input_ids"), ("token_loss_mask", "token_mask")):
        if k not in names:
            raise ValueError("dump_nemo_rl: train_data has no %r (or %r)" % (alias, k))
    B = None
    for k, v in cols:
        if not isinstance(v, list):
            raise ValueError("dump_nemo_rl: %s is not per sample (a (B, …) tensor or a list), got %s" % (k, type(v).__name__))
        if B is None:
            B = len(v)
        elif len(v) != B:
            raise ValueError("dump_nemo_rl: %s has %d rows, %s %d" % (k, len(v), cols[0][0], B))
    path = _nemo_rl_path(path, step)
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for i in range(B):
            # make_microbatch_iterator(1) slices every key to [i:i + 1]; json.dumps with its defaults.
            f.write(json.dumps({**{k: v[i:i + 1] for k, v in cols}, "idx": i}, default=_json.jsonable) + "\n")
    os.replace(tmp, path)
    return path
