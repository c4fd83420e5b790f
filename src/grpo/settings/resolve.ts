// Reads a `config` or `run` object against a settings table: every given field must be in the table and
// valid (type, allowed values, range), every missing one takes the table's default. Errors name the field
// (SettingsError; CLI exit 2). A small accessor for the trainer objectives until the shared table parser
// (src/grpo/settings/table.ts) replaces it.
import { SettingsError, type SettingSpec, type SettingValue } from './types.ts';

function check(spec: SettingSpec, v: unknown, where: string): SettingValue {
  const field = `${where}.${spec.name}`;
  if (v === null) {
    if (spec.nullable || spec.default === null) return null;
    throw new SettingsError(`${field}: must not be null`);
  }
  const bad = (want: string): never => {
    throw new SettingsError(`${field}: expected ${want}, got ${JSON.stringify(v)}`);
  };
  const range = (x: number): number => {
    const lo = spec.min !== undefined && (spec.exclusive ? x <= spec.min : x < spec.min);
    const hi = spec.max !== undefined && (spec.exclusive ? x >= spec.max : x > spec.max);
    if (lo || hi) throw new SettingsError(`${field}: ${x} is out of range (${spec.exclusive ? 'exclusive ' : ''}min ${spec.min ?? '-∞'}, max ${spec.max ?? '∞'})`);
    return x;
  };
  switch (spec.type) {
    case 'number':
      return typeof v === 'number' && Number.isFinite(v) ? range(v) : bad('a finite number');
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v) ? range(v) : bad('an integer');
    case 'boolean':
      return typeof v === 'boolean' ? v : bad('true or false');
    case 'enum':
      return typeof v === 'string' && spec.values?.includes(v) ? v : bad(`one of ${spec.values?.join(', ')}`);
    case 'string':
      return typeof v === 'string' ? v : bad('a string');
    case 'number-list':
      return Array.isArray(v) && v.every((x) => typeof x === 'number' && Number.isFinite(x)) ? (v as number[]) : bad('a list of numbers');
    case 'object':
      return typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : bad('an object');
  }
}

/** The table's values for `given` (defaults filled in); `where` prefixes error messages (e.g. "config"). */
export function resolveSettings<T = Record<string, SettingValue>>(table: readonly SettingSpec[], given: Record<string, unknown>, where: string): T {
  const byName = new Map(table.map((s) => [s.name, s]));
  for (const k of Object.keys(given)) {
    if (!byName.has(k)) throw new SettingsError(`${where}.${k}: not a ${table[0]?.trainer ?? ''} setting the studio knows`);
  }
  const out: Record<string, SettingValue> = {};
  for (const spec of table) out[spec.name] = spec.name in given ? check(spec, given[spec.name], where) : spec.default;
  return out as T;
}
