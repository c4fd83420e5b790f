// A finding: one problem in a batch, located by sample and token span. Defined here, beside the batch
// reader, because the validator (src/io/validate.ts) reports element-level problems as findings before
// the Doctor (src/doctor/, which builds on io) adds its rules' findings to the same list.

export type Severity = 'error' | 'warning' | 'info';

export interface Finding {
  rule: string;
  severity: Severity;
  /** Row of the batch (0-based). */
  sample?: number;
  /** Field the span refers to (completion_ids unless said otherwise). */
  field?: string;
  /** Token positions [start, end) in that field's row. */
  span?: [number, number];
  message: string;
  hint: string;
}
