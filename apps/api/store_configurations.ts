/**
 * The store's configurations: create, read, replace, delete and list, each write one
 * transaction that reads its row back before committing. The base of
 * {@linkcode Store} (store.ts), which adds runs and results on top.
 *
 * @module
 */

import type { Db } from "./db.ts";
import type { Configuration, ConfigurationInput } from "./schemas.ts";
import type { TrainSpec } from "./run_executor.ts";
import { newId, type Paged, paged, readBack, toConfiguration } from "./store_rows.ts";

/** Configurations on one database (the base of the store). */
export class ConfigurationStore {
  /** The database (exposed for tests and migrations). */
  readonly db: Db;
  /**
   * Checked before a training run is queued, by every caller (the API and the
   * dashboard alike); throws {@linkcode RunRefusedError} to refuse it. The lab sets it
   * to the memory estimate.
   */
  admit: ((spec: TrainSpec) => Promise<void>) | null = null;

  /** Wraps a migrated database; use {@linkcode openStore}. */
  constructor(db: Db) {
    this.db = db;
  }

  /** Closes the database. */
  close(): Promise<void> {
    return this.db.close();
  }

  /**
   * Stores a new configuration. The row is read back inside the transaction, so a
   * configuration that cannot be read back is never committed.
   */
  createConfiguration(input: ConfigurationInput): Promise<Configuration> {
    const now = Date.now();
    const c: Configuration = { ...input, id: newId("cfg"), createdAt: now, updatedAt: now };
    return this.db.transaction(async (tx) => {
      await tx.run(
        `INSERT INTO configurations (id, name, model, preset, config, device, budget_ratio,
          budget_bytes, policy, cost_model, steps, seed, overhead_limit, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          c.id,
          c.name,
          c.model,
          c.preset,
          c.config === null ? null : JSON.stringify(c.config),
          c.device,
          c.budgetRatio,
          c.budgetBytes,
          c.policy,
          c.costModel,
          c.steps,
          c.seed,
          c.overheadLimit,
          c.createdAt,
          c.updatedAt,
        ],
      );
      const rows = await tx.all("SELECT * FROM configurations WHERE id = ?", [c.id]);
      return readBack(toConfiguration(rows[0]!));
    });
  }

  /** One configuration, or null. */
  async getConfiguration(id: string): Promise<Configuration | null> {
    const rows = await this.db.all("SELECT * FROM configurations WHERE id = ?", [id]);
    return rows[0] ? toConfiguration(rows[0]) : null;
  }

  /** Replaces a configuration's fields; null if it does not exist. */
  updateConfiguration(id: string, input: ConfigurationInput): Promise<Configuration | null> {
    const now = Date.now();
    return this.db.transaction(async (tx) => {
      const n = await tx.run(
        `UPDATE configurations SET name = ?, model = ?, preset = ?, config = ?, device = ?,
        budget_ratio = ?, budget_bytes = ?, policy = ?, cost_model = ?, steps = ?, seed = ?,
        overhead_limit = ?, updated_at = ? WHERE id = ?`,
        [
          input.name,
          input.model,
          input.preset,
          input.config === null ? null : JSON.stringify(input.config),
          input.device,
          input.budgetRatio,
          input.budgetBytes,
          input.policy,
          input.costModel,
          input.steps,
          input.seed,
          input.overheadLimit,
          now,
          id,
        ],
      );
      if (n === 0) return null;
      const rows = await tx.all("SELECT * FROM configurations WHERE id = ?", [id]);
      return readBack(toConfiguration(rows[0]!));
    });
  }

  /** Deletes a configuration (its runs keep their snapshot); false if it did not exist. */
  deleteConfiguration(id: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await tx.run("UPDATE runs SET configuration_id = NULL WHERE configuration_id = ?", [id]);
      return (await tx.run("DELETE FROM configurations WHERE id = ?", [id])) > 0;
    });
  }

  /** Configurations, newest first. */
  async listConfigurations(
    page: { limit: number; offset: number },
  ): Promise<Paged<Configuration>> {
    const [count] = await this.db.all("SELECT COUNT(*) AS n FROM configurations");
    const total = Number(count?.n ?? 0);
    const rows = await this.db.all(
      "SELECT * FROM configurations ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
      [page.limit, page.offset],
    );
    return paged(rows.map(toConfiguration), total, page);
  }
}
