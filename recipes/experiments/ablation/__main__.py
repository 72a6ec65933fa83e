from recipes.experiments.ablation.recipe import main

main()
