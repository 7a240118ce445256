/**
 * The token rows under `{prefix}/tokens` (a handful: whole scans are fine) and the rows this store has read,
 * which let a request in from memory and are compared by its group's commit. Apart from the record's writes.
 */
import type { ConfirmTokens, Scope, TokenRow } from '../store.js';
import type { Compare, EtcdClient, KeyValue, TxnOp, TxnResult } from './client.js';
import { cmp, op } from './client.js';
import { EtcdError, isEtcdError } from './errors.js';
import { MAX_TXN_OPS, type EtcdKeys } from './keys.js';
import { pagesOf } from './prefix.js';
import { rangeKv, SEQ_RETRIES, seqOf } from './state-key.js';

export class EtcdTokens {
  /**
   * Every stored token this store has read (`findToken`, a group's read or lost compare), with
   * its key's mod_revision: `knownToken` answers from it, and a group's commit compares the
   * revision (`ConfirmTokens`). Only stored tokens enter it (an unknown token is never kept),
   * so it is as large as the token table; an entry leaves when a read finds its key gone.
   */
  private readonly rows = new Map<string, { readonly row: TokenRow; readonly rev: bigint }>();

  constructor(
    private readonly client: EtcdClient,
    private readonly keys: EtcdKeys,
  ) {}

  /** Linearizable reads of `tokens`' keys, as many per txn as etcd takes. */
  async readTokens(tokens: ConfirmTokens): Promise<void> {
    for (let i = 0; i < tokens.length; i += MAX_TXN_OPS) {
      const part = tokens.slice(i, i + MAX_TXN_OPS);
      this.note(
        await this.client.txn({ compare: [], success: part.map((h) => op.range(this.keys.token(h))) }),
        0,
        part,
      );
    }
  }

  /** Keeps the token rows a txn's ranges from `from` on returned (in `tokens`' order); true when one differs from the kept one. */
  note(r: TxnResult, from: number, tokens: ConfirmTokens): boolean {
    let changed = false;
    tokens.forEach((h, i) => {
      const kv = rangeKv(r, from + i);
      const had = this.rows.get(h);
      if (kv === undefined) {
        changed ||= had !== undefined;
        this.rows.delete(h);
        return;
      }
      changed ||= had?.rev !== kv.modRevision;
      this.rows.set(h, { row: JSON.parse(kv.value) as TokenRow, rev: kv.modRevision });
    });
    return changed;
  }

  /** `tokens`' keys compared with the revision each was last read at (an unknown one: absent). */
  compares(tokens: ConfirmTokens): Compare[] {
    return tokens.map((h) => cmp.mod(this.keys.token(h), '==', this.rows.get(h)?.rev ?? 0n));
  }

  async insertToken(machine: string, scope: Scope, sha256: string, created: number): Promise<void> {
    await this.tokenWrite((rows) => {
      if (rows.some((r) => r.row.sha256 === sha256))
        throw new Error(`a token with this sha256 is stored already (UNIQUE tokens.sha256)`);
      return { revoke: [], insert: { machine, scope, sha256, created } };
    });
  }

  async findToken(sha256: string): Promise<TokenRow | undefined> {
    const { kv } = await this.client.get(this.keys.token(sha256));
    if (kv === undefined) {
      this.rows.delete(sha256);
      return undefined;
    }
    const row = JSON.parse(kv.value) as TokenRow;
    this.rows.set(sha256, { row, rev: kv.modRevision });
    return row;
  }

  knownToken(sha256: string): TokenRow | undefined {
    return this.rows.get(sha256)?.row;
  }

  async replaceToken(machine: string, scope: Scope, sha256: string, created: number): Promise<number> {
    return this.tokenWrite((rows) => {
      if (rows.some((r) => r.row.sha256 === sha256))
        throw new Error(`a token with this sha256 is stored already (UNIQUE tokens.sha256)`);
      return {
        revoke: rows.filter((r) => r.row.machine === machine && r.row.scope === scope && r.row.revoked === null),
        at: created,
        insert: { machine, scope, sha256, created },
      };
    });
  }

  async revokeTokens(machine: string, at: number): Promise<number> {
    return this.tokenWrite((rows) => ({
      revoke: rows.filter((r) => r.row.machine === machine && r.row.revoked === null),
      at,
    }));
  }

  async revokeToken(machine: string, id: number, at: number): Promise<number> {
    return this.tokenWrite((rows) => ({
      revoke: rows.filter((r) => r.row.machine === machine && r.row.id === id && r.row.revoked === null),
      at,
    }));
  }

  async listTokens(): Promise<readonly TokenRow[]> {
    return (await this.tokenRows()).map((r) => r.row).sort((a, b) => a.id - b.id);
  }

  async hasActiveAdmin(): Promise<boolean> {
    return (await this.tokenRows()).some((r) => r.row.scope === 'admin' && r.row.revoked === null);
  }

  private async tokenRows(): Promise<Array<{ row: TokenRow; kv: KeyValue }>> {
    const out: Array<{ row: TokenRow; kv: KeyValue }> = [];
    for await (const page of pagesOf(this.client, this.keys.tokenDir))
      for (const kv of page) out.push({ row: JSON.parse(kv.value) as TokenRow, kv });
    return out;
  }

  /**
   * Read every token and the sequence, decide, write in one txn comparing what was read; a
   * lost compare reads and decides again. Returns how many were revoked.
   */
  private async tokenWrite(
    decide: (rows: Array<{ row: TokenRow; kv: KeyValue }>) => {
      revoke: Array<{ row: TokenRow; kv: KeyValue }>;
      at?: number;
      insert?: { machine: string; scope: Scope; sha256: string; created: number };
    },
  ): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      const rows = await this.tokenRows();
      const { kv: seqKv } = await this.client.get(this.keys.tokenSeq);
      const d = decide(rows);
      if (d.revoke.length === 0 && d.insert === undefined) return 0;
      const compare: Compare[] = d.revoke.map((r) => cmp.mod(r.kv.key, '==', r.kv.modRevision));
      const success: TxnOp[] = d.revoke.map((r) =>
        op.put(r.kv.key, JSON.stringify({ ...r.row, revoked: d.at ?? null })),
      );
      let mine: string | null = null;
      if (d.insert !== undefined) {
        const id = seqOf(seqKv) + 1;
        const row: TokenRow = {
          id,
          machine: d.insert.machine,
          scope: d.insert.scope,
          sha256: d.insert.sha256,
          created: d.insert.created,
          revoked: null,
        };
        mine = JSON.stringify(row);
        compare.push(
          cmp.mod(this.keys.tokenSeq, '==', seqKv?.modRevision ?? 0n),
          cmp.absent(this.keys.token(row.sha256)),
        );
        success.push(op.put(this.keys.tokenSeq, String(id)), op.put(this.keys.token(row.sha256), mine));
      }
      try {
        if ((await this.client.txn({ compare, success })).succeeded) return d.revoke.length;
      } catch (err) {
        if (!isEtcdError(err, 'indeterminate')) throw err;
        // Read back the first key the txn would have written.
        const probe =
          d.insert !== undefined ? this.keys.token(d.insert.sha256) : (d.revoke[0] as { kv: KeyValue }).kv.key;
        const want = mine ?? JSON.stringify({ ...(d.revoke[0] as { row: TokenRow }).row, revoked: d.at ?? null });
        const back = await this.client.get(probe).catch(() => null);
        if (back === null) throw err;
        if (back.kv?.value === want) return d.revoke.length;
      }
      if (attempt >= SEQ_RETRIES)
        throw new EtcdError('unavailable', 'etcd: the tokens kept changing under the write (too many writers)');
    }
  }
}
