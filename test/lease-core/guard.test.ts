import t from 'tap';
import { checkGeneration, parseGeneration } from '../../packages/lease-core/src/index.js';
import type { GuardResult } from '../../packages/lease-core/src/index.js';

const parses: ReadonlyArray<readonly [string, unknown, number | null]> = [
  ['a plain number parses', '12', 12],
  ['a trailing newline is ignored (files)', '12\n', 12],
  ['a trailing CRLF is ignored', '12\r\n', 12],
  ['zero parses (never granted)', '0', 0],
  ['the largest safe integer parses', '9007199254740991', 9007199254740991],
  ['sixteen digits past the safe range are refused', '9007199254740993', null],
  ['seventeen digits are refused', '12345678901234567', null],
  ['a leading zero is refused', '012', null],
  ['an empty string is refused', '', null],
  ['a lone newline is refused', '\n', null],
  ['two trailing newlines are refused', '12\n\n', null],
  ['surrounding space is refused', ' 12', null],
  ['a negative number is refused', '-1', null],
  ['exponent notation is refused', '1e3', null],
  ['a fraction is refused', '1.0', null],
  ['hex is refused', '0x10', null],
  ['undefined (a missing header) is refused', undefined, null],
  ['null is refused', null, null],
  ['a number (not text) is refused', 12, null],
];

for (const [name, text, expected] of parses) {
  t.test(name, async (t) => {
    t.equal(parseGeneration(text as string), expected, `parseGeneration(${JSON.stringify(text)})`);
  });
}

const checks: ReadonlyArray<readonly [string, number, unknown, GuardResult]> = [
  ['a higher generation is accepted and raises the mark', 5, 6, { ok: true, highest: 6 }],
  ['an equal generation is accepted', 5, 5, { ok: true, highest: 5 }],
  ['a lower generation is refused as stale', 5, 4, { ok: false, reason: 'stale-generation', highest: 5 }],
  ['the first write on a fresh mark is accepted', 0, 1, { ok: true, highest: 1 }],
  ['generation 0 is not a token', 0, 0, { ok: false, reason: 'bad-generation', highest: 0 }],
  ['a negative generation is refused', 5, -6, { ok: false, reason: 'bad-generation', highest: 5 }],
  ['a fraction is refused', 5, 5.5, { ok: false, reason: 'bad-generation', highest: 5 }],
  ['NaN is refused', 5, Number.NaN, { ok: false, reason: 'bad-generation', highest: 5 }],
  ['an unsafe integer is refused', 5, 2 ** 53, { ok: false, reason: 'bad-generation', highest: 5 }],
  ['a numeric string is refused (no coercion)', 5, '6', { ok: false, reason: 'bad-generation', highest: 5 }],
  ['a missing generation is refused', 5, undefined, { ok: false, reason: 'bad-generation', highest: 5 }],
];

for (const [name, highest, incoming, expected] of checks) {
  t.test(name, async (t) => {
    t.same(checkGeneration(highest, incoming), expected, `checkGeneration(${highest}, ${String(incoming)})`);
  });
}
