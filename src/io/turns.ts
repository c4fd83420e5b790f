// The turns of a conversation row as the template round-trip proof found them (src/tokenize/roundtrip.ts,
// run by the Doctor: src/doctor/turns.ts), in the compact form the Doctor's report carries to the page and
// the grid model reads (src/view/turns.ts). Here, in io, because the producer (doctor / tokenize) and the
// consumer (view) may both import io and nothing of each other. Types and one constant only.

/** The role of a span of tokens: a message's role, or the tool-call part of an assistant turn. */
export const TURN_ROLES = ['system', 'user', 'assistant', 'tool_call', 'tool'] as const;
export type TurnRole = (typeof TURN_ROLES)[number];

/** One turn of a row: message index and role over [start, end) of prompt_ids ⧺ completion_ids (left padding included). */
export interface ProvenSpan {
  message: number;
  role: TurnRole;
  start: number;
  end: number;
}

/** A run of stored tokens that differ from the render the trainer evidently used, over [start, end) as above (start = end: only the render has tokens there). */
export interface ProvenDiff {
  start: number;
  end: number;
  /** The proof's cause (src/tokenize/roundtrip.ts CAUSES): tool-call-retokenized, bpe-seam, … */
  cause: string;
  message: number;
}

/** A row's proven turns and the differences of the way with fewer of them, or why the row could not be proven. */
export type ProvenRow = { way: 'incremental' | 'full'; spans: ProvenSpan[]; diffs: ProvenDiff[] } | { error: string };
