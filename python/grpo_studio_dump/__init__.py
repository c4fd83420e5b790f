"""grpo_studio_dump: save a trainer's GRPO batch, as the trainer holds it, for GRPO Studio.

    from grpo_studio_dump import dump_trl, dump_verl, dump_openrlhf, dump_nemo_rl

    dump_trl(trainer, outputs, path=None)              # TRL GRPOTrainer._generate_and_score_completions
    dump_verl(batch, config, tokenizer, path)          # verl RayPPOTrainer.fit, after compute_advantage
    dump_openrlhf(experiences, args, tokenizer, path)  # OpenRLHF PPOTrainer.train_step, after make_experience_batch
    dump_nemo_rl(train_data, path, step=N)             # NeMo-RL grpo_train, where it logs train_data_step{N}.jsonl

Pure Python. torch and safetensors are used when installed; else (or with GRPO_STUDIO_DUMP_PURE=1) the
bundled writer saves torch tensors, numpy arrays or plain nested lists in the same safetensors layout.
dump_nemo_rl writes NeMo-RL's own JSONL (no safetensors).
"""
from ._dumps import dump_nemo_rl, dump_openrlhf, dump_trl, dump_verl
from ._writer import PURE_ENV, save, save_bundled

__version__ = "0.1.0"
__all__ = ["dump_trl", "dump_verl", "dump_openrlhf", "dump_nemo_rl", "save", "save_bundled", "PURE_ENV", "__version__"]
