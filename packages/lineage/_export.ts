/**
 * Exports of the lineage graph (JSON and Graphviz DOT), behind
 * `Lineage.toJSON` and `Lineage.toDot`.
 *
 * @module
 */

import type { CallNode, LineageJSON, StorageNode } from "./graph.ts";

/** The JSON export of `storages` (see `Lineage.toJSON`). */
export function lineageToJSON(storages: Iterable<StorageNode>): LineageJSON {
  const calls = new Map<number, CallNode>();
  const out: LineageJSON["storages"] = [];
  for (const s of storages) {
    out.push({
      id: s.id,
      bytes: s.bytes,
      residency: s.residency,
      pinned: s.pinned,
      extRefs: s.extRefs,
      tensors: s.tensors.map((t) => t.name),
    });
    for (const t of s.tensors) if (t.producer) calls.set(t.producer.id, t.producer);
  }
  return {
    storages: out,
    calls: [...calls.values()].sort((a, b) => a.id - b.id).map((c) => ({
      id: c.id,
      op: c.op,
      inputs: c.inputs.map((t) => t.name),
      outputs: c.outputs.map((t) => t.name),
      cost: c.cost,
      replayable: c.replayable,
    })),
  };
}

/** Graphviz DOT of a JSON export: storages as boxes (dashed when evicted), calls as ellipses. */
export function jsonToDot(j: LineageJSON): string {
  const lines = ["digraph lineage {", "  rankdir=LR;"];
  const owner = new Map<string, number>();
  for (const s of j.storages) {
    const style = s.residency === "resident" ? "solid" : "dashed";
    lines.push(
      `  s${s.id} [shape=box,style=${style},label=${
        dotLabel(`${s.tensors.join(",")}\\n${s.bytes} B ${s.residency}`)
      }];`,
    );
    for (const t of s.tensors) owner.set(t, s.id);
  }
  for (const c of j.calls) {
    lines.push(`  c${c.id} [shape=ellipse,label=${dotLabel(`${c.op}\\n${c.cost}`)}];`);
    for (const t of c.inputs) {
      const s = owner.get(t);
      if (s !== undefined) lines.push(`  s${s} -> c${c.id};`);
    }
    for (const t of c.outputs) {
      const s = owner.get(t);
      if (s !== undefined) lines.push(`  c${c.id} -> s${s};`);
    }
  }
  lines.push("}");
  return lines.join("\n");
}

function dotLabel(text: string): string {
  return `"${text.replaceAll('"', '\\"')}"`;
}
