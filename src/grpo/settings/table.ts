// Parsing a raw config object (a loss case's or batch file's `config` / `run`, a form's state) against a
// settings table: every value is checked against its SettingSpec (type, range, allowed values) and missing
// ones take the table's default. Errors are SettingsError naming the field; keys no spec names are returned
// in `unknown` so the caller can list them — never silently dropped.
import { SettingsError, type SettingSpec, type SettingValue } from './types.ts';
import { shown } from '../../io/shown.ts';

export type SettingsTable = readonly SettingSpec[];

export interface ParsedSettings<T> {
  values: T;
  /** Keys of the raw object that no spec of the table names. */
  unknown: string[];
}

/** The table's spec for `name`; throws if the table has none (a programming error, not bad input). */
export function specOf(table: SettingsTable, name: string): SettingSpec {
  const s = table.find((x) => x.name === name);
  if (!s) throw new Error(`no setting "${name}" in the table`);
  return s;
}

/** `o`'s entries whose keys a row of the table names (the rest belong to another table). */
export function rowsIn(table: SettingsTable, o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([k]) => table.some((s) => s.name === k)));
}

/**
 * `o` with each key that is a row's former name (SettingSpec.formerly) and not itself a row's name renamed to the
 * row's, and the [former, current] pairs renamed. Both names given with different values is a SettingsError
 * naming both (`where` prefixes them); with the same value they are one.
 */
export function withCurrentNames(table: SettingsTable, o: Record<string, unknown>, where = 'config'): { values: Record<string, unknown>; renamed: [string, string][] } {
  const values: Record<string, unknown> = {};
  const renamed: [string, string][] = [];
  for (const [k, v] of Object.entries(o)) {
    const row = table.some((s) => s.name === k) ? undefined : table.find((s) => s.formerly === k);
    if (!row) {
      values[k] = v;
      continue;
    }
    const now = o[row.name];
    if (now !== undefined && JSON.stringify(now) !== JSON.stringify(v)) throw new SettingsError(`${where}.${k} = ${JSON.stringify(v)} and ${where}.${row.name} = ${JSON.stringify(now)}: one setting under its former name and today's, with different values`);
    values[row.name] = v;
    renamed.push([k, row.name]);
  }
  return { values, renamed };
}

/** Every spec's default, by name. */
export function defaultsOf<T>(table: SettingsTable): T {
  return Object.fromEntries(table.map((s) => [s.name, s.default])) as T;
}

function inRange(s: SettingSpec, x: number): boolean {
  if (s.min !== undefined && (s.exclusive ? x <= s.min : x < s.min)) return false;
  if (s.max !== undefined && (s.exclusive ? x >= s.max : x > s.max)) return false;
  return true;
}

function rangeText(s: SettingSpec): string {
  const lo = s.min === undefined ? '' : `${s.exclusive ? '>' : '>='} ${s.min}`;
  const hi = s.max === undefined ? '' : `${s.exclusive ? '<' : '<='} ${s.max}`;
  return [lo, hi].filter(Boolean).join(' and ');
}

/** One value checked against its spec; `where` prefixes the field name in errors ("config"). */
export function checkSetting(s: SettingSpec, v: unknown, where: string): SettingValue {
  if (s.list && Array.isArray(v) && v.length > 0) return v.map((x) => checkSetting({ ...s, list: false }, x, where)) as SettingValue;
  const field = `${where}.${s.name}`;
  const bad = (what: string) => new SettingsError(`${field}: expected ${what}, got ${shown(v)}`);
  if (v === null) {
    if (s.nullable) return null;
    throw bad(`a value (not null)`);
  }
  switch (s.type) {
    case 'number':
    case 'integer': {
      if (typeof v !== 'number' || !Number.isFinite(v) || (s.type === 'integer' && !Number.isInteger(v))) throw bad(`${s.type === 'integer' ? 'an integer' : 'a finite number'}${s.nullable ? ' or null' : ''}`);
      if (!inRange(s, v)) throw new SettingsError(`${field}: ${v} is out of range (${s.type === 'integer' ? 'an integer' : 'a number'} ${rangeText(s)})`);
      return v;
    }
    case 'boolean':
      if (typeof v !== 'boolean') throw bad('true or false');
      return v;
    case 'enum':
      if (typeof v !== 'string' || !s.values!.includes(v)) throw bad(`one of ${s.values!.join(', ')}${s.nullable ? ' or null' : ''}`);
      return v;
    case 'string':
      // A number is its text (Infinity too: verl's str(float) then float() reads "inf" as it reads "Infinity").
      if (s.orNumber && typeof v === 'number' && !Number.isNaN(v)) return String(v);
      if (typeof v !== 'string') throw bad(s.orNumber ? 'a string or a number' : 'a string');
      return v;
    case 'number-list':
      const list = s.length === undefined ? 'a list of numbers' : `a list of ${s.length} numbers`;
      // A non-finite element (Python's json.dumps writes float('inf') as Infinity) is said to be one, not only shown.
      const infinite = Array.isArray(v) && v.some((x) => typeof x === 'number' && !Number.isFinite(x));
      if (!Array.isArray(v) || v.some((x) => typeof x !== 'number' || !Number.isFinite(x)) || (s.length !== undefined && v.length !== s.length)) throw bad(`${list}${s.nullable ? ' or null' : ''}${infinite ? ' (finite: the studio takes no Infinity or NaN here)' : ''}`);
      return v as number[];
    case 'object':
      if (typeof v !== 'object' || Array.isArray(v)) throw bad('an object');
      return v as Record<string, unknown>;
  }
}

/**
 * Parses `raw` against `table`: known keys are checked, missing ones take the default. `required` names the
 * keys that must be present (a missing one is an error naming it).
 */
export function parseSettings<T>(table: SettingsTable, raw: unknown, where: string, opts: { required?: readonly string[] } = {}): ParsedSettings<T> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new SettingsError(`${where}: expected an object`);
  const o = raw as Record<string, unknown>;
  const values: Record<string, SettingValue> = {};
  for (const s of table) {
    if (o[s.name] === undefined) {
      if (opts.required?.includes(s.name)) throw new SettingsError(`${where}.${s.name}: missing`);
      values[s.name] = s.default;
    } else {
      values[s.name] = checkSetting(s, o[s.name], where);
    }
  }
  const known = new Set(table.map((s) => s.name));
  return { values: values as T, unknown: Object.keys(o).filter((k) => !known.has(k)) };
}
