// The knowledge graph tab: facts, episodes, supersessions and conflicts, drawn with Cytoscape.js.
// Labels never overlap: cose lays nodes out with their labels' size, then a few passes push apart
// any two nodes whose boxes (label included) still touch. Dense graphs show labels on hover only.
(function () {
  const box = document.getElementById("graph");
  if (!box || typeof cytoscape === "undefined") return;
  const DENSE = 60; // more nodes than this: labels on hover/selection only
  const GAP = 6; // px between two nodes' boxes

  function separate(cy, withLabels) {
    const nodes = cy.nodes(":visible");
    for (let pass = 0; pass < 80; pass++) {
      let moved = false;
      const boxes = nodes.map((n) => n.boundingBox({ includeLabels: withLabels }));
      for (let i = 0; i < nodes.length; i++) {
        for (let j = i + 1; j < nodes.length; j++) {
          const a = boxes[i], b = boxes[j];
          const dx = Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1) + GAP;
          const dy = Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1) + GAP;
          if (dx <= 0 || dy <= 0) continue;
          moved = true;
          const ni = nodes[i], nj = nodes[j];
          const pi = ni.position(), pj = nj.position();
          // push along the axis that needs the smaller move, half each
          if (dy < dx) {
            const s = (pi.y <= pj.y ? -1 : 1) * (dy / 2);
            ni.position({ x: pi.x, y: pi.y + s });
            nj.position({ x: pj.x, y: pj.y - s });
            a.y1 += s; a.y2 += s; b.y1 -= s; b.y2 -= s;
          } else {
            const s = (pi.x <= pj.x ? -1 : 1) * (dx / 2);
            ni.position({ x: pi.x + s, y: pi.y });
            nj.position({ x: pj.x - s, y: pj.y });
            a.x1 += s; a.x2 += s; b.x1 -= s; b.x2 -= s;
          }
        }
      }
      if (!moved) return;
    }
  }

  fetch(box.dataset.src, { credentials: "same-origin" })
    .then((r) => r.json())
    .then((data) => {
      const dense = data.nodes.length > DENSE;
      const cy = cytoscape({
        container: box,
        elements: [...data.nodes, ...data.edges],
        layout: { name: "preset" },
        minZoom: 0.2,
        maxZoom: 3,
        style: [
          {
            selector: "node",
            style: {
              label: "data(label)", "font-size": 9, "text-wrap": "wrap", "text-max-width": 110,
              "text-valign": "bottom", "text-margin-y": 3, width: 14, height: 14,
              "text-background-color": "#fff", "text-background-opacity": 0.85, "text-background-padding": 1,
            },
          },
          { selector: "node.quiet", style: { "text-opacity": 0 } },
          { selector: "node.quiet:selected, node.quiet.hover", style: { "text-opacity": 1, "z-index": 10 } },
          { selector: 'node[kind = "fact"]', style: { "background-color": "#2456c7" } },
          { selector: "node[?superseded]", style: { "background-color": "#9aa3b2" } },
          { selector: 'node[kind = "episode"]', style: { "background-color": "#d9822b", shape: "round-rectangle" } },
          { selector: "edge", style: { width: 1.5, "curve-style": "bezier", "target-arrow-shape": "triangle", "line-color": "#8895ab", "target-arrow-color": "#8895ab" } },
          { selector: 'edge[kind = "conflict"]', style: { "line-color": "#b42318", "target-arrow-color": "#b42318" } },
          { selector: 'edge[kind = "episode"]', style: { "line-style": "dotted", "target-arrow-shape": "none" } },
        ],
      });
      if (dense) cy.nodes().addClass("quiet");
      const layout = cy.layout({
        name: "cose", animate: false, randomize: true, nodeDimensionsIncludeLabels: !dense,
        idealEdgeLength: () => 110, nodeRepulsion: () => 900000, nodeOverlap: 40,
        componentSpacing: 120, gravity: 0.25, numIter: 2500, padding: 20, fit: false,
      });
      layout.run();
      separate(cy, !dense); // dense: the nodes themselves apart, labels shown one at a time
      cy.fit(undefined, 20);
      cy.on("mouseover", "node", (event) => event.target.addClass("hover"));
      cy.on("mouseout", "node", (event) => event.target.removeClass("hover"));
      cy.on("tap", "node", (event) => { const url = event.target.data("url"); if (url) window.location.href = url; });
      window.engramGraph = cy; // for the browser tests: label boxes via cytoscape's API
      box.dataset.dense = String(dense);
      box.dataset.nodes = String(cy.nodes().length);
    });
})();
