// A small, safe markdown renderer for the text values runs log
// (trainwatch.Text): the source's HTML is escaped first, so nothing in it is
// ever markup; then headings, paragraphs, **bold**, *italic*, `inline code`,
// fenced code blocks, lists (- * + and 1.), block quotes and [links](url)
// whose url is http(s) (any other scheme leaves the link's text alone).

export function escapeHtml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

// Placeholders for finished HTML (code spans, links) while the rest is
// formatted: NUL never survives (stripped from the source).
const PH = "\u0000";

// Inline markdown of one escaped line (or paragraph).
function inline(escaped: string): string {
  const held: string[] = [];
  const hold = (html: string) => PH + (held.push(html) - 1) + PH;
  // Code spans: their content is shown as is.
  let s = escaped.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_, _t, code: string) => hold("<code>" + code.trim() + "</code>"));
  // Links: [text](http(s)://...), with an optional "title". The URL is
  // already escaped (&amp;, &quot;), so it cannot leave its attribute.
  s = s.replace(/\[([^\]]*)\]\(\s*([^()\s]+)(?:\s+&quot;[^]*?&quot;)?\s*\)/g, (_, text: string, href: string) => {
    if (!/^https?:\/\/[^\s]+$/i.test(href)) return text;
    return hold(`<a href="${href}" rel="noopener noreferrer nofollow" target="_blank">${emphasis(text)}</a>`);
  });
  // Bare http(s) URLs become links too.
  s = s.replace(/(^|[\s(])(https?:\/\/[^\s<>()\u0000]+[^\s<>().,;:!?\u0000])/gi, (_, pre: string, href: string) =>
    pre + hold(`<a href="${href}" rel="noopener noreferrer nofollow" target="_blank">${href}</a>`));
  s = emphasis(s);
  return s.replace(new RegExp(PH + "(\\d+)" + PH, "g"), (_, i: string) => held[Number(i)]);
}

function emphasis(s: string): string {
  return s
    .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, "$1<strong>$2</strong>")
    .replace(/\*(?=[^\s*])([^*]*?[^\s*]|[^\s*])\*/g, "<em>$1</em>")
    .replace(/(^|[^\w])_(?=[^\s_])([^_]*?[^\s_]|[^\s_])_(?!\w)/g, "$1<em>$2</em>")
    .replace(/~~(?=\S)([\s\S]*?\S)~~/g, "<del>$1</del>");
}

const FENCE = /^\s{0,3}(`{3,}|~{3,})\s*([\w+-]*)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const ULIST = /^(\s*)[-*+]\s+(.*)$/;
const OLIST = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s{0,3}&gt;\s?(.*)$/;

// Markdown to HTML; every character of the source is escaped before any
// markup is added.
export function renderMarkdown(src: string): string {
  const lines = src.replace(/\u0000/g, "").replace(/\r\n?/g, "\n").split("\n");
  const out: string[] = [];
  let para: string[] = [];
  const flush = () => {
    if (para.length) out.push("<p>" + inline(para.map(escapeHtml).join("\n").trim()).replace(/ {2,}\n/g, "<br>") + "</p>");
    para = [];
  };
  for (let i = 0; i < lines.length; ) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence) {
      flush();
      const close = new RegExp("^\\s{0,3}" + fence[1][0] + "{" + fence[1].length + ",}\\s*$");
      const code: string[] = [];
      for (i++; i < lines.length && !close.test(lines[i]); i++) code.push(lines[i]);
      i++; // the closing fence (or the end)
      const lang = fence[2] ? ` class="language-${escapeHtml(fence[2])}"` : "";
      out.push(`<pre><code${lang}>` + escapeHtml(code.join("\n")) + "</code></pre>");
      continue;
    }
    if (/^\s*$/.test(line)) {
      flush();
      i++;
      continue;
    }
    const hd = HEADING.exec(line);
    if (hd) {
      flush();
      const n = hd[1].length;
      out.push(`<h${n}>` + inline(escapeHtml(hd[2])) + `</h${n}>`);
      i++;
      continue;
    }
    if (RULE.test(line) && !ULIST.test(line.replace(RULE, "x"))) {
      flush();
      out.push("<hr>");
      i++;
      continue;
    }
    if (/^ {4,}|^\t/.test(line) && para.length === 0) {
      // An indented code block.
      const code: string[] = [];
      while (i < lines.length && (/^ {4,}|^\t/.test(lines[i]) || (/^\s*$/.test(lines[i]) && i + 1 < lines.length && /^ {4,}|^\t/.test(lines[i + 1])))) {
        code.push(lines[i].replace(/^( {4}|\t)/, ""));
        i++;
      }
      out.push("<pre><code>" + escapeHtml(code.join("\n")) + "</code></pre>");
      continue;
    }
    const esc = escapeHtml(line);
    if (QUOTE.test(esc)) {
      flush();
      const quoted: string[] = [];
      while (i < lines.length && QUOTE.test(escapeHtml(lines[i]))) {
        quoted.push(lines[i].replace(/^\s{0,3}>\s?/, ""));
        i++;
      }
      out.push("<blockquote>" + renderMarkdown(quoted.join("\n")) + "</blockquote>");
      continue;
    }
    if (ULIST.test(line) || OLIST.test(line)) {
      flush();
      const ordered = !ULIST.test(line);
      const start = ordered ? Number(OLIST.exec(line)![2]) : 1;
      const items: string[][] = [];
      // Items of the same kind; continuation lines (indented, or not a new
      // block) belong to the item above.
      while (i < lines.length) {
        const l = lines[i];
        const m = ordered ? OLIST.exec(l) : ULIST.exec(l);
        if (m && m[1].length < 2) {
          items.push([ordered ? m[3] : m[2]]);
          i++;
        } else if (items.length && !/^\s*$/.test(l) && (/^\s+/.test(l) || !(FENCE.test(l) || HEADING.test(l) || ULIST.test(l) || OLIST.test(l) || QUOTE.test(escapeHtml(l))))) {
          items[items.length - 1].push(l.replace(/^\s{2,4}/, ""));
          i++;
        } else break;
      }
      const tag = ordered ? "ol" : "ul";
      const attr = ordered && start !== 1 ? ` start="${start}"` : "";
      out.push(`<${tag}${attr}>` + items.map((it) => "<li>" + listItem(it) + "</li>").join("") + `</${tag}>`);
      continue;
    }
    para.push(line);
    i++;
  }
  flush();
  return out.join("\n");
}

// A list item: its first line inline, nested lists rendered as blocks.
function listItem(lines: string[]): string {
  if (lines.length > 1 && lines.slice(1).some((l) => ULIST.test(l) || OLIST.test(l))) {
    const first = lines.findIndex((l, k) => k > 0 && (ULIST.test(l) || OLIST.test(l)));
    return inline(lines.slice(0, first).map(escapeHtml).join("\n")) + renderMarkdown(lines.slice(first).join("\n"));
  }
  return inline(lines.map(escapeHtml).join("\n"));
}
