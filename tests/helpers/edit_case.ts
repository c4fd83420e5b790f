// Writes an edited copy of a safetensors case (a golden loss / trainer case) to a temporary file: the CLI
// tests feed it malformed tensors or metadata and check the one-line error.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseSafeTensors, toF32, toF64, toI32, writeSafeTensors, type TensorOut } from '../../src/io/safetensors.ts';

export type CaseEdit = (t: Record<string, TensorOut>, meta: Record<string, string>) => void;

const tmp = mkdtempSync(path.join(tmpdir(), 'grpo-edited-case-'));

/** A copy of `file` with `edit` applied to its tensors and metadata; returns the copy's path. */
export function caseWith(file: string, edit: CaseEdit): string {
  const st = parseSafeTensors(new Uint8Array(readFileSync(file)));
  const t: Record<string, TensorOut> = {};
  for (const [name, info] of st.tensors) {
    t[name] = info.dtype === 'I32' ? { dtype: 'I32', shape: info.shape, data: toI32(st, name).slice() } : info.dtype === 'F64' ? { dtype: 'F64', shape: info.shape, data: toF64(st, name).slice() } : { dtype: 'F32', shape: info.shape, data: toF32(st, name).slice() };
  }
  const meta = { ...st.metadata };
  edit(t, meta);
  const f = path.join(tmp, `edited-${Math.random().toString(36).slice(2)}.safetensors`);
  writeFileSync(f, writeSafeTensors(t, meta));
  return f;
}
