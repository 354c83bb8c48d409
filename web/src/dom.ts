// A tiny DOM builder: h("a", {href: "/", onclick: fn}, "text", child...).
export type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, unknown>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") {
        el.addEventListener(k.slice(2), v as EventListener);
      } else if (k === "class") {
        el.className = String(v);
      } else if (k === "value" && "value" in el) {
        (el as HTMLInputElement).value = String(v);
      } else if (k === "checked" && "checked" in el) {
        (el as HTMLInputElement).checked = Boolean(v);
      } else {
        el.setAttribute(k, v === true ? "" : String(v));
      }
    }
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el: Element): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

// A link handled by the client-side router (see main.ts).
export function link(href: string, ...children: Child[]): HTMLAnchorElement {
  return h("a", { href, "data-link": true }, ...children);
}

// A message box: kind is "info", "error" or "unavailable".
export function notice(kind: "info" | "error" | "unavailable", text: string): HTMLElement {
  return h("div", { class: "notice notice-" + kind, role: kind === "error" ? "alert" : "status" }, text);
}
