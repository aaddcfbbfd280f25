/**
 * Islands, as in Fresh: a component rendered on the server inside a marker element
 * that carries its props; the browser bundle (`client.ts`) hydrates each marker with
 * the same component. Only islands ship JavaScript.
 *
 * @module
 */

import type { ComponentType, VNode } from "preact";

/** Wraps `Component` so that it renders as an island called `name`. */
export function island<P extends object>(
  name: string,
  Component: ComponentType<P>,
): (props: P) => VNode {
  const Wrapped = (props: P): VNode => (
    <div data-island={name} data-props={JSON.stringify(props)} class="island">
      <Component {...props} />
    </div>
  );
  Wrapped.displayName = `Island(${name})`;
  return Wrapped;
}
