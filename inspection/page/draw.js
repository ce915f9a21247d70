// What every part of the page draws with: an element, a probability or an attention as a bar, a table whose cells
// may be elements. A table is a real table (its columns align whatever the font), never text padded with spaces.

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function bar(p, colour, cls) {  // a probability or an attention as a bar 12em long at 1
  const b = el("span", "bar" + (cls ? " " + cls : ""));
  b.style.width = (12 * Math.max(0, p)).toFixed(2) + "em";
  if (colour) b.style.background = colour;
  return b;
}

function barCell(p, cls) {  // a bar and its number, for a table cell
  const cell = el("span");
  cell.appendChild(bar(p, null, cls));
  cell.appendChild(document.createTextNode(" " + p.toFixed(4)));
  return { node: cell, cls: "barcell" };
}

// A table whose cells may be elements (bars, links) as well as text: {node, cls} for an element, a string for text.
// The first column is a name (left-aligned), the others numbers (right-aligned), unless a cell says otherwise.
function richTable(parent, header, rows, cls) {
  const table = el("table", "grid" + (cls ? " " + cls : ""));
  const head = el("tr");
  header.forEach((h, c) => head.appendChild(el("th", c === 0 ? "name" : "", h)));
  table.appendChild(head);
  for (const cells of rows) {
    const row = el("tr");
    cells.forEach((c, i) => {
      const td = el("td", typeof c === "string" ? (i === 0 ? "name" : "") : c.cls || "");
      if (typeof c === "string") td.textContent = c; else td.appendChild(c.node);
      row.appendChild(td);
    });
    table.appendChild(row);
  }
  parent.appendChild(table);
  return table;
}
