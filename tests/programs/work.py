# Program 2 of tests/programs: json dumps/loads of a few MB, then sqlite3.
import hashlib
import json
import sqlite3

doc = {"items": [{"id": i, "name": "item-%d" % i, "tags": ["t%d" % (i % 13), "u%d" % (i % 7)],
                  "price": i * 0.25, "nested": {"a": list(range(i % 10)), "b": str(i) * 3}}
                 for i in range(30000)]}
text = json.dumps(doc, sort_keys=True)
back = json.loads(text)
assert back == doc
print("json: %d bytes, sha256 %s" % (len(text), hashlib.sha256(text.encode()).hexdigest()))
del doc, back, text

db = sqlite3.connect(":memory:")
db.execute("create table t (id integer primary key, grp integer, name text, v real)")
db.executemany("insert into t (grp, name, v) values (?, ?, ?)",
               ((i % 17, "row-%d" % i, i / 3.0) for i in range(5000)))
db.commit()
for row in db.execute("select grp, count(*), round(sum(v), 3), max(name) from t group by grp order by grp"):
    print("sqlite:", *row)
print("sqlite: total", db.execute("select count(*) from t where name like 'row-4%'").fetchone()[0])
db.close()
