// A reader's answer to unusable input: a BatchFormatError (the CLI's exit 2) of exactly one line; its message.
import { expect } from 'vitest';

export function refusal(f: () => unknown): string {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  if (err === undefined) throw new Error('not refused');
  expect((err as Error).name, String(err)).toBe('BatchFormatError');
  expect((err as Error).message).not.toContain('\n');
  return (err as Error).message;
}
