#!/usr/bin/python3
# ops.py NODEDIR - for every backend node test NODEDIR/test_*/model.onnx print one line
#   test_name<TAB>Op1 Op2 ...
# naming the distinct operators of the graph (sorted).  Operators of another domain print as
# domain:Op; operators inside subgraph attributes (If, Loop, Scan) are included, so a case is
# applicable only when every one of them is supported.  Needs /usr/bin/python3 with
# python3-onnx.  Used by test/node/run.sh.
import os
import sys

import onnx


def graph_ops(graph, ops):
    for node in graph.node:
        dom = node.domain
        ops.add(node.op_type if dom in ("", "ai.onnx") else dom + ":" + node.op_type)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                graph_ops(attr.g, ops)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    graph_ops(g, ops)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: ops.py NODEDIR\n")
        return 2
    root = sys.argv[1]
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "model.onnx")
        if not name.startswith("test_") or not os.path.isfile(path):
            continue
        model = onnx.load(path, load_external_data=False)
        ops = set()
        graph_ops(model.graph, ops)
        print("%s\t%s" % (name, " ".join(sorted(ops)) or "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
