// The shape of one trainer setting, in the trainer's own words. Every setting the studio understands is
// declared once, in a table (one file per trainer: trl.ts, verl.ts, openrlhf.ts beside this one), and that
// table drives parsing and validation of a batch file's or loss case's `config`, the page's forms, export
// and CLI flags. An unknown value or one out of range is an error naming the field, never a silent default.

export type TrainerId = 'trl' | 'verl' | 'openrlhf';
export const TRAINERS: readonly TrainerId[] = ['trl', 'verl', 'openrlhf'];

/**
 * The parts of an update a setting can belong to, in the order the page's trainer form shows them: the form's
 * group title, and whether the trainer's objective reads the row (a row of such a scope away from its default
 * makes the step run the trainer's objective rather than the studio loss: step_objective.ts objectiveFor).
 */
export const SCOPES = {
  loss: { title: 'loss', objective: true },
  run: { title: 'run context', objective: true },
  batch: { title: 'batch', objective: true },
  forward: { title: 'training forward', objective: false },
  reference: { title: 'reference model', objective: true },
  sampling: { title: 'sampling', objective: false },
  advantages: { title: 'advantages', objective: false },
  optimizer: { title: 'optimizer', objective: false },
} as const satisfies Record<string, { title: string; objective: boolean }>;
export type Scope = keyof typeof SCOPES;

export type SettingValue = number | string | boolean | null | number[] | string[] | Record<string, unknown>;

export interface SettingSpec {
  /** The trainer's own field name: TRL GRPOConfig field, verl leaf name (`loss_agg_mode`), OpenRLHF argument (`actor.eps_clip_low_high`). */
  name: string;
  trainer: TrainerId;
  /** What the value is; `enum` takes one of `values`. */
  type: 'number' | 'integer' | 'boolean' | 'enum' | 'string' | 'number-list' | 'object';
  default: SettingValue;
  /** null is allowed (e.g. TRL `delta`, `epsilon_high` = null means `epsilon`). */
  nullable?: boolean;
  /**
   * The trainer's earlier name for the same setting (OpenRLHF's flat argparse names before ed62d0e2, e.g.
   * `init_kl_coef` for `algo.kl.init_coef`): a dump's config under it is read as this row at the edge, with a note.
   */
  formerly?: string;
  /** string: a number (not NaN) is taken too, as its text (verl's rollout_rs_threshold: Optional[str | float]). */
  orNumber?: boolean;
  /** enum: the allowed values; string: the values the studio reproduces, offered by the form (others are read and refused where used). */
  values?: readonly string[];
  /** number-list: exactly this many numbers (a [low, high] pair: 2). */
  length?: number;
  min?: number;
  max?: number;
  /** min / max excluded from the range. */
  exclusive?: boolean;
  /** Which part of the update reads it (SCOPES). `run` = run context (num_processes, gradient_accumulation_steps, ...). */
  scope: Scope;
  /** One line: meaning and formula, shown as the form's tooltip and in docs. */
  doc: string;
  /**
   * Where the value sits in the trainer's own config object when it is saved whole (verl's
   * OmegaConf.to_container(config): `actor_rollout_ref.actor.loss_agg_mode`); absent: the name itself (TRL's
   * args.to_dict(), OpenRLHF's flat args). The readers map these paths to the row once, at the edge.
   */
  path?: string;
  /** Where the trainer defines / reads it (repository path), for the tooltip and docs. */
  source?: string;
  /** A studio-only setting (no trainer has it, e.g. kl_estimator), kept in the same table and marked. */
  studio?: boolean;
  /** A list of such values is one too: a batch merged from several files holds each file's (TRL `rank`: the ranks it holds), or the trainer takes one value or a list (OpenRLHF / verl LoRA target_modules: all-linear or module names). */
  list?: boolean;
  /** Shown in the page's "Loss & optimizer" panel (and the what-if form); every row is in the trainer form. */
  form?: 'loss';
  /**
   * The page sampler's field that is this row: the trainer samples with the value it scores and groups with (TRL's
   * one `temperature`, `max_completion_length`, `num_generations`), so the page's prompt set holds one value for
   * both, in its sampling form (src/bridge/settings.ts samplingLayer).
   */
  sampler?: SamplerField;
}

/** The page sampler's fields a trainer row can be (src/bridge/protocol_settings.ts SamplingSettings). */
export type SamplerField = 'num_generations' | 'max_new_tokens' | 'temperature' | 'top_k' | 'top_p' | 'min_p' | 'repetition_penalty';

/** The value type a row declares: its `type`, an enum's `values`. */
type RowValue<S> = S extends { type: 'boolean' }
  ? boolean
  : S extends { type: 'enum'; values: readonly (infer V)[] }
    ? V
    : S extends { type: 'number' | 'integer' }
      ? number
      : S extends { type: 'string' }
        ? string
        : S extends { type: 'number-list' }
          ? number[]
          : S extends { type: 'object' }
            ? Record<string, unknown>
            : never;

/** A row's value, or a list of them where `list: true` (a batch merged from several files: TRL's rank). */
type ListedValue<S> = S extends { list: true } ? RowValue<S> | RowValue<S>[] : RowValue<S>;

/**
 * A table's values once read (parseSettings / resolveSettings), typed from its rows: each row's name, the type it
 * declares (or a list of it where `list: true`), null where `nullable: true`. The table is the one list of the
 * names; no interface repeats them.
 */
export type SettingsValues<T extends readonly { name: string }[]> = {
  -readonly [S in T[number] as S['name']]: S extends { nullable: true } ? ListedValue<S> | null : ListedValue<S>;
};

/**
 * A trainer's row builder: the row as written, its name, type, values and nullable kept literal (the `const`
 * parameter) so SettingsValues can read them, marked as `trainer`'s.
 */
export const rowBuilder =
  <Tr extends TrainerId>(trainer: Tr) =>
  <const T extends Omit<SettingSpec, 'trainer'>>(spec: T): T & Omit<SettingSpec, keyof T | 'trainer'> & { trainer: Tr } => ({ trainer, ...spec });

/** A config or run value that cannot be used, naming the field. CLI: exit 2. */
export class SettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SettingsError';
  }
}
