"""The references every classifier of ``recipes/experiments/xcls/recipe.py`` is read against, on the classification
files of a directory (``train.en.tsv``, ``valid.{en,de}.tsv``): TF-IDF + logistic regression, the
data's README baseline, and the majority class."""

from pathlib import Path


def tfidf(xcls: Path, pool: Path = None, fraction: float = 0.0):
    """TF-IDF (words, 1-2 grams) + logistic regression on the English training rows, the
    reference of the task's README; None without scikit-learn. With ``pool`` (id, text rows): self-trained
    as ``--self-train 1`` does, refitted with its own labels of the pool's most confident ``fraction``."""
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        return None

    def rows(name):
        lines = (xcls / name).read_text(encoding="utf-8").splitlines()[1:]
        return [r.split("\t")[2] for r in lines], [r.split("\t")[1] for r in lines]

    def fit(texts, labels):
        vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2)
        return vectorizer, LogisticRegression(max_iter=2000, C=10).fit(vectorizer.fit_transform(texts), labels)

    texts, labels = rows("train.en.tsv")
    vectorizer, model = fit(texts, labels)
    if pool is not None:
        unlabelled = [r.split("\t")[1] for r in pool.read_text(encoding="utf-8").splitlines()[1:]]
        probabilities = model.predict_proba(vectorizer.transform(unlabelled))
        chosen = probabilities.max(axis=1).argsort()[::-1][: round(fraction * len(unlabelled))]
        pseudo = [model.classes_[probabilities[i].argmax()] for i in chosen]
        vectorizer, model = fit(texts + [unlabelled[i] for i in chosen], labels + pseudo)
    result = {}
    for lang in ("en", "de"):
        t, gold = rows(f"valid.{lang}.tsv")
        predicted = model.predict(vectorizer.transform(t))
        result[f"acc_{lang}"] = round(100 * sum(p == g for p, g in zip(predicted, gold)) / len(gold), 2)
    return result


def majority(xcls: Path):
    result = {}
    train = [r.split("\t")[1] for r in (xcls / "train.en.tsv").read_text().splitlines()[1:]]
    top = max(set(train), key=train.count)
    for lang in ("en", "de"):
        gold = [r.split("\t")[1] for r in (xcls / f"valid.{lang}.tsv").read_text().splitlines()[1:]]
        result[f"acc_{lang}"] = round(100 * gold.count(top) / len(gold), 2)
    return result, len(gold)
